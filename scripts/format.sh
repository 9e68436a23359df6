#!/usr/bin/env bash
# Formats simnic's C/C++ sources with clang-format and the tree's .clang-format (issue 27 point 7).
#
# usage: scripts/format.sh              format every source file in place
#        scripts/format.sh --check      change nothing; exit 1 listing the files that differ
#        scripts/format.sh [--check] FILE...   only these files
#
# The files: C/C++ under simnic/, shim/, rdmacm/, viz/, tests/, examples/ and tools/, except
# folders of code simnic does not write (third_party/, vendor/, external/). labs/ is left out:
# its starters are the students' code and its broken/*.patch variants are diffs against them,
# which reformatting would break (labs/.clang-format disables formatting there for editors too).
#
# Different clang-format releases format differently, so the tree is kept in the output of one
# major release, FORMAT_MAJOR. With another release (or none), --check exits 77, which ctest
# reports as skipped; SIMNIC_CLANG_FORMAT names the binary to use (e.g. clang-format-14).
set -euo pipefail
start_dir=$PWD
cd "$(dirname "$0")/.."

FORMAT_MAJOR=14
ROOTS=(simnic shim rdmacm viz tests examples tools)
SKIP_CODE=77

check=0
if [[ ${1:-} == --check ]]; then
  check=1
  shift
fi

find_clang_format() {
  local c
  if [[ -n ${SIMNIC_CLANG_FORMAT:-} ]]; then
    command -v "$SIMNIC_CLANG_FORMAT"
    return
  fi
  for c in "clang-format-$FORMAT_MAJOR" clang-format; do
    command -v "$c" >/dev/null && { command -v "$c"; return; }
  done
  return 1
}

# The sources to format: git's list (tracked and new, ignored files left out), or find's without git.
source_files() {
  local roots=()
  local r
  for r in "${ROOTS[@]}"; do [[ -d $r ]] && roots+=("$r"); done
  ((${#roots[@]})) || return 0
  if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files --cached --others --exclude-standard -- "${roots[@]}"
  else
    find "${roots[@]}" -type f
  fi | grep -E '\.(c|cc|cpp|h|hpp)$' | grep -vE '(^|/)(third_party|vendor|external)/' | sort -u
}

if ! cf=$(find_clang_format); then
  echo "format: SKIPPED: ${SIMNIC_CLANG_FORMAT:-clang-format} not found (install the clang-format package," \
       "which scripts/setup.sh does, or set SIMNIC_CLANG_FORMAT)"
  exit $SKIP_CODE
fi
version=$("$cf" --version | head -n 1)
major=$(sed -nE 's/.*version ([0-9]+)\..*/\1/p' <<<"$version")
if [[ $major != "$FORMAT_MAJOR" ]]; then
  echo "format: $cf is \"$version\"; the tree is formatted with clang-format $FORMAT_MAJOR, whose output" \
       "differs from other releases'. Install clang-format-$FORMAT_MAJOR or set SIMNIC_CLANG_FORMAT."
  ((check)) && { echo "format: SKIPPED"; exit $SKIP_CODE; }
  exit 1
fi

if (($#)); then
  files=()
  for f in "$@"; do
    [[ $f == /* ]] || f=$start_dir/$f
    [[ -f $f ]] || { echo "format: no such file: $f" >&2; exit 2; }
    files+=("$f")
  done
else
  mapfile -t files < <(source_files)
fi
((${#files[@]})) || { echo "format: no files"; exit 0; }

if ((!check)); then
  printf '%s\0' "${files[@]}" | xargs -0 -n 50 "$cf" -i --style=file
  echo "format: formatted ${#files[@]} files with $cf ($major)"
  exit 0
fi

# One clang-format for all the files: --dry-run reports each file's first difference as
# "FILE:LINE:COL: error: code should be clang-formatted".
mapfile -t differ < <(printf '%s\0' "${files[@]}" |
  xargs -0 -n 100 "$cf" --style=file --dry-run -Werror --ferror-limit=1 2>&1 |
  sed -nE 's/^(.+):[0-9]+:[0-9]+: error: .*/\1/p' | sort -u)
if ((${#differ[@]} == 0)); then
  echo "format: ${#files[@]} files formatted as .clang-format says"
  exit 0
fi
echo "format: ${#differ[@]} of ${#files[@]} files differ from what clang-format $major makes of them:"
printf '  %s\n' "${differ[@]}"
echo "format: the first lines that differ, in ${differ[0]}:"
"$cf" --style=file "${differ[0]}" | diff -u "${differ[0]}" - | sed -n '3,30p' || true
echo "format: fix with scripts/format.sh (all files) or scripts/format.sh FILE..., then commit the result"
exit 1
