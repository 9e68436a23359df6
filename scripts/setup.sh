#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages simnic builds, tests and demos with. Packages already
# present are skipped; apt-get runs through sudo when not root. Safe to run again.
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config          # the toolchain
  python3                                   # scripts/check_layers.py: the layer table, checked at build time
  libboost-dev                              # Boost.Asio, simnicd's event loop
  libcli11-dev                              # simnicd's command-line flags
  zlib1g-dev libisal-dev                    # CRC-32 for the RoCEv2 ICRC (ISA-L: fast; zlib: fallback, CRC combine)
  libibverbs-dev                            # rdma-core's public headers the shim is built against
  librdmacm-dev                             # rdma_cma.h/rdma_verbs.h that rdmacm/ is built against
  rdmacm-utils                              # unmodified rdma_cm programs the tests run (rping, udaddy, ...)
  ibverbs-utils perftest qperf              # unmodified verbs programs the tests run
  libgtest-dev                              # unit and integration tests
  tshark                                    # decodes our pcaps in the tests
  ethtool                                   # gso_test: a namespace whose lo segments UDP in software
  iproute2                                  # `ip netns`: two hosts over a veth pair (netns_test)
  python3-pyverbs                           # another unmodified verbs consumer
  nlohmann-json3-dev                        # simnic-viz reads the JSON-lines trace
  libimgui-dev libstb-dev libglfw3-dev      # simnic-viz: Dear ImGui (GLFW + OpenGL3), PNG writer
  xvfb xauth libgl1-mesa-dri                # simnic-viz's screenshot tests: a virtual X display
  clang libclang-rt-dev                     # the fuzzers (libFuzzer) and the ASan/UBSan stage of test.sh;
                                            # clang only recommends the runtimes, hence libclang-rt-dev
  clang-format                              # scripts/format.sh and ctest "format" (not pulled in by clang)
  ccache                                    # test.sh's extra sanitizer builds reuse compiled objects
  gnuplot-nox                               # simnic bench draws its PNG plot with it
  # issue 25: the middleware tests (tests/middleware) run Debian's own builds, unmodified
  ucx-utils                                 # ucx_info, ucx_perftest (UCX 1.13: rc_verbs, ud_verbs)
  openmpi-bin libopenmpi-dev netpipe-openmpi  # mpirun.openmpi, mpicc.openmpi (the Allreduce check), NPopenmpi
  mpich libmpich-dev                        # mpiexec.mpich, mpicc.mpich (MPICH 4.0 over UCX)
  libfabric-bin                             # fi_info, fi_pingpong (libfabric 1.17's verbs provider)
  fio                                       # fio's ioengine=rdma
)

missing=()
for p in "${PACKAGES[@]}"; do
  [[ "$p" == \#* ]] && continue
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#PACKAGES[@]} packages already installed"
  exit 0
fi

SUDO=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  SUDO=(sudo)
fi
echo "setup: installing ${missing[*]}"
# tshark asks whether non-root users may capture; the answer does not matter here.
echo "wireshark-common wireshark-common/install-setuid boolean false" | "${SUDO[@]}" debconf-set-selections 2>/dev/null || true
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -qq
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "setup: done"
