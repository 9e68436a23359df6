// Symbol versions for names that exist in two ABI versions: the current definition is bound
// as name@@IBVERBS_1.1 here, the IBVERBS_1.0 one as name@IBVERBS_1.0 in compat_1_0.c.
// "@@@" makes the definition itself the default version (binutils >= 2.35).
#pragma once
#define SIMNIC_DEFAULT_VERSION_1_1(name) __asm__(".symver " #name ", " #name "@@@IBVERBS_1.1")
