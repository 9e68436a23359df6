#!/usr/bin/env bash
# The .deb a teacher installs, end to end (issue 24 point 2): `cpack -G DEB` from the build tree,
# `apt-get install ./simnic_*.deb` into a clean root, then, as an unprivileged student there:
# `simnic up 2`, the unmodified ibv_rc_pingpong between the two NICs, `simnic lab start 1` and
# `simnic lab check 1` run to the end, `simnic down`; last, a purge.
#
# The clean root is an overlay over / (writes go to a tmpfs) in private mount, network and pid
# namespaces, chroot'ed into, with the source and build trees hidden under empty tmpfs: only the
# package can provide simnic there. The network namespace has only lo, so apt-get fetches
# nothing: the package's dependencies must already be on this machine (they are where simnic
# builds and its tests run).
# Leaving the pid namespace kills every process started in it; the mounts go with the namespace.
#
#   tests/package/deb_test.sh BUILD_DIR      exit 0 pass, 1 fail, 77 skipped (with the reason)
set -euo pipefail
BUILD=$(realpath "${1:?usage: deb_test.sh BUILD_DIR}")
SRC=$(realpath "$(dirname "$0")/../..")

skip() { echo "SKIP: $*"; exit 77; }
[[ $(id -u) -eq 0 ]] || skip "needs root (overlay mount, chroot, namespaces)"
for tool in cpack dpkg-deb apt-get unshare chroot runuser useradd ip; do
  command -v "$tool" >/dev/null || skip "$tool is not installed"
done
grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null || true
grep -qw overlay /proc/filesystems || skip "the kernel has no overlayfs"
[[ -x $BUILD/bin/simnic ]] || skip "$BUILD is not a built simnic tree"

WORK=$(mktemp -d /tmp/simnic-deb-test.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

echo "== cpack -G DEB in $BUILD"
(cd "$BUILD" && timeout 60 cpack -G DEB -B "$WORK/out") > "$WORK/cpack.log" 2>&1 || { cat "$WORK/cpack.log"; exit 1; }
DEBS=("$WORK"/out/simnic_*_*.deb)
[[ -f ${DEBS[0]} && ${#DEBS[@]} -eq 1 ]] || { echo "FAIL: no single simnic_<version>_<arch>.deb"; ls "$WORK/out"; exit 1; }
echo "built $(basename "${DEBS[0]}")"

# The part that runs inside the namespaces, as root: build the clean root, install, test.
cat > "$WORK/inner.sh" <<'INNER'
set -euo pipefail
WORK=$1 SRC=$2 BUILD=$3 DEB=$4
fails=0
check() {  # check NAME CONDITION...
  local name=$1; shift
  if "$@"; then echo "PASS $name"; else echo "FAIL $name"; fails=$((fails + 1)); fi
}
ip link set lo up
mkdir -p "$WORK/ovl" && mount -t tmpfs tmpfs "$WORK/ovl"
mkdir -p "$WORK/ovl/upper" "$WORK/ovl/work" "$WORK/root"
mount -t overlay overlay -o "lowerdir=/,upperdir=$WORK/ovl/upper,workdir=$WORK/ovl/work" "$WORK/root"
R=$WORK/root
mount -t proc proc "$R/proc"
mount --rbind /dev "$R/dev"
mount --rbind /sys "$R/sys"
for d in /tmp /run "$SRC" "$BUILD"; do   # nothing of the trees or this host's runtime state
  [[ -d $R$d ]] && mount -t tmpfs tmpfs "$R$d"
done
mkdir -p "$R/var/cache/simnic-test" && cp "$DEB" "$R/var/cache/simnic-test/"
IN() { chroot "$R" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root "$@"; }

check "simnic is not on the clean root before the install" test ! -e "$R/usr/bin/simnic"
echo "== apt-get install /var/cache/simnic-test/$(basename "$DEB") (offline: this network namespace has only lo)"
if ! IN env DEBIAN_FRONTEND=noninteractive apt-get install -y "/var/cache/simnic-test/$(basename "$DEB")" \
     > "$WORK/apt.log" 2>&1; then
  cat "$WORK/apt.log"; echo "FAIL apt-get install"; exit 1
fi
check "package installed" IN sh -c "dpkg-query -W -f='\${Status}' simnic | grep -q 'install ok installed'"
check "shim in the private lib dir" test -f "$R/usr/lib/simnic/libibverbs.so.1" -a -f "$R/usr/lib/simnic/librdmacm.so.1"
check "device-node preload in the private lib dir" test -f "$R/usr/lib/simnic/libsimnic_devnode.so"
check "the shim does not shadow the system's libibverbs" IN sh -c "! ldconfig -p | grep -q /simnic/"
check "man pages simnic(1) and simnicd(8)" test -s "$R/usr/share/man/man1/simnic.1" -a -s "$R/usr/share/man/man8/simnicd.8"
check "bash completion completes 'simnic lab ch'" IN bash -c \
  '. /usr/share/bash-completion/completions/simnic; COMP_WORDS=(simnic lab ch); COMP_CWORD=2; _simnic; [[ ${COMPREPLY[*]} == check ]]'
check "docs in /usr/share/doc/simnic" test -s "$R/usr/share/doc/simnic/teaching.md"
T=$R/usr/share/simnic/teacher
check "the sealed labs are in the package (share/simnic/teacher)" test -d "$T/labs"
check "group simnic-teachers created" IN sh -c 'getent group simnic-teachers > /dev/null'
# The package seals its labs: no solution left in the student-visible tree.
check "no solution/ or broken/ in share/simnic/labs" \
  test -z "$(find "$R/usr/share/simnic/labs" -path '*/[0-9][0-9]-*/solution' -o -path '*/[0-9][0-9]-*/broken')"
readable_by_teachers_only() {  # all of it group simnic-teachers, dirs 0750, files 0640
  local gid; gid=$(IN getent group simnic-teachers | cut -d: -f3)
  [[ -n $gid && -z $(find "$T" ! -group "$gid") && -z $(find "$T" -type d ! -perm 0750) &&
     -z $(find "$T" -type f ! -perm 0640) ]]
}
check "sealed material: group simnic-teachers, dirs 0750, files 0640" readable_by_teachers_only

IN useradd -m -s /bin/bash student
cat > "$R/home/student/run.sh" <<'STUDENT'
set -u
cd ~
out() { echo "---- $1"; cat "$2"; }
simnic env | grep -q "LD_LIBRARY_PATH='/usr/lib/simnic" && echo "PASS simnic env names /usr/lib/simnic" \
  || echo "FAIL simnic env names /usr/lib/simnic"
simnic up 2 > up.txt 2>&1 && echo "PASS simnic up 2" || { echo "FAIL simnic up 2"; out up up.txt; }
simnic run -- ibv_rc_pingpong -d simnic0 -g 0 -n 20 > server.txt 2>&1 &
server=$!
sleep 0.5
timeout 30 simnic run -- ibv_rc_pingpong -d simnic1 -g 0 -n 20 127.0.0.1 > client.txt 2>&1; crc=$?
timeout 10 tail --pid=$server -f /dev/null; wait $server; src=$?
if [[ $crc -eq 0 && $src -eq 0 ]] && grep -q "20 iters" client.txt && grep -q "20 iters" server.txt; then
  echo "PASS ibv_rc_pingpong between simnic0 and simnic1"
else
  echo "FAIL ibv_rc_pingpong between simnic0 and simnic1 (client $crc, server $src)"; out client client.txt; out server server.txt
fi
simnic down > down.txt 2>&1 && echo "PASS simnic down" \
  || { echo "FAIL simnic down"; out down down.txt; simnic logs > logs.txt 2>&1; out logs logs.txt; }
simnic lab start 1 > start.txt 2>&1 && [[ -f lab01/README.md ]] && echo "PASS simnic lab start 1" \
  || { echo "FAIL simnic lab start 1"; out start start.txt; }
timeout 120 simnic lab check 1 > check.txt 2>&1; rc=$?
# The untouched starter must fail its checks, and the grader must run to its summary line.
if [[ $rc -ne 0 && $rc -ne 124 ]] && grep -q "^FAIL " check.txt && grep -Eq "[0-9]+ passed, [0-9]+ failed" check.txt \
   && ! grep -q Traceback check.txt; then
  echo "PASS simnic lab check 1 grades the starter (exit $rc): $(grep -E '[0-9]+ passed, [0-9]+ failed' check.txt | tail -1)"
else
  echo "FAIL simnic lab check 1 (exit $rc)"; out check check.txt
fi
if [[ ! -e /usr/share/simnic/teacher ]]; then echo "FAIL no /usr/share/simnic/teacher"
elif ls /usr/share/simnic/teacher > /dev/null 2>&1 || find /usr/share/simnic/teacher -type f -exec cat {} + > /dev/null 2>&1
then echo "FAIL student can read share/simnic/teacher"
else echo "PASS student can neither list nor read share/simnic/teacher"; fi
STUDENT
IN chown student: /home/student/run.sh
echo "== as student (uid $(IN id -u student))"
IN runuser -u student -- env -i PATH=/usr/bin:/bin HOME=/home/student bash /home/student/run.sh | tee "$WORK/student.log"
fails=$((fails + $(grep -c '^FAIL' "$WORK/student.log" || true)))

echo "== purge"
IN dpkg --purge simnic > "$WORK/purge.log" 2>&1 || { cat "$WORK/purge.log"; fails=$((fails + 1)); }
check "purge removes simnic and the simnic-teachers group" IN sh -c '! test -e /usr/bin/simnic && ! getent group simnic-teachers'
echo "$fails failed"
exit $((fails > 0))
INNER

echo "== installing into a clean root (overlay over /, private namespaces)"
timeout --kill-after=5 110 unshare --mount --net --pid --fork --propagation private \
  bash "$WORK/inner.sh" "$WORK" "$SRC" "$BUILD" "${DEBS[0]}"
