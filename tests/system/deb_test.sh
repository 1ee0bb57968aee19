#!/usr/bin/env bash
# The Debian package of `make deb`, as a user gets it: lintian finds no error
# or warning; `apt-get install ./pvdisk_*.deb` installs it with its
# dependencies; /usr/bin/pvdisk runs, its man page is found, and a mount made
# by the installed binary serves data; `apt-get remove --purge pvdisk` leaves
# none of the files `dpkg -L pvdisk` listed.
#
# It installs a package on this machine, so it runs as root, refuses to run
# when a pvdisk package or /usr/bin/pvdisk is there already, takes a lock
# against a second run, and removes the package on every way out (failure
# included): no /usr/bin/pvdisk is left for other tests.
# Usage: deb_test.sh BUILD_DIR   (run by `make deb-test`)
set -euo pipefail
build=$(cd "$1" && pwd)
fail() { echo "FAIL: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "SKIP: deb_test.sh installs a package: run it as root"; exit 77; }
command -v lintian >/dev/null || fail "lintian not installed (scripts/install-deps.sh)"
debs=("$build"/pvdisk_*.deb)
[ ${#debs[@]} -eq 1 ] && [ -f "${debs[0]}" ] ||
  fail "expected one pvdisk_*.deb in $build (make deb), found: ${debs[*]}"
deb=${debs[0]}

exec 9>/run/lock/pvdisk-deb-test.lock
flock -n 9 || fail "another deb_test.sh is running"
if dpkg-query -W -f='${Status}' pvdisk 2>/dev/null | grep -q installed; then
  fail "a pvdisk package is installed already; this test installs its own"
fi
[ ! -e /usr/bin/pvdisk ] || fail "/usr/bin/pvdisk exists and is not from a package"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/pvdisk-deb-test.XXXXXX")
installed=0
cleanup() {
  status=$?
  if mountpoint -q "$tmp/mnt" 2>/dev/null; then
    /usr/bin/pvdisk unmount "$tmp/mnt" || fusermount3 -u "$tmp/mnt" || true
  fi
  if [ "$installed" = 1 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get remove --purge -y -q pvdisk \
      >"$tmp/remove-on-exit.log" 2>&1 || true
  fi
  rm -rf "$tmp"
  exit $status
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "deb_test: lintian $(basename "$deb")"
lintian --fail-on error,warning "$deb" 2>&1 | grep -v "running with root" |
  tee "$tmp/lintian.log" || true
if grep -q '^[EW]: ' "$tmp/lintian.log"; then fail "lintian: errors or warnings"; fi

echo "deb_test: apt-get install $(basename "$deb")"
cp "$deb" "$tmp/"
installed=1
(cd "$tmp" && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
   --no-install-recommends "./$(basename "$deb")" >"$tmp/install.log" 2>&1) ||
  { cat "$tmp/install.log"; fail "apt-get install failed"; }
dpkg -L pvdisk | sort >"$tmp/files"
grep -qx /usr/bin/pvdisk "$tmp/files" || fail "the package has no /usr/bin/pvdisk"

[ "$(command -v pvdisk)" = /usr/bin/pvdisk ] || fail "pvdisk is not /usr/bin/pvdisk on PATH"
/usr/bin/pvdisk --version
[ "$(man -w pvdisk)" = /usr/share/man/man1/pvdisk.1.gz ] || fail "man -w pvdisk: $(man -w pvdisk)"
[ "$(man -w 5 pvdisk-stats)" = /usr/share/man/man5/pvdisk-stats.5.gz ] || fail "man -w 5 pvdisk-stats"

echo "deb_test: a mount by /usr/bin/pvdisk"
mkdir "$tmp/mnt"
/usr/bin/pvdisk create "$tmp/disk.img" --size 16M
/usr/bin/pvdisk mount "$tmp/mnt" --disk "$tmp/disk.img" --log "$tmp/daemon.log"
head -c 4M /dev/urandom >"$tmp/data"
dd if="$tmp/data" of="$tmp/mnt/disk.img" bs=1M oflag=direct conv=notrunc status=none
cmp -n 4194304 "$tmp/data" "$tmp/mnt/disk.img" || fail "data read back differs"
/usr/bin/pvdisk unmount "$tmp/mnt"
cmp -n 4194304 "$tmp/data" "$tmp/disk.img" || fail "the image lacks the data"

echo "deb_test: mount -t fuse.pvdisk through mount.fuse3 and /usr/bin/pvdisk"
mount -t fuse.pvdisk "$tmp/disk.img" "$tmp/mnt" -o queues=2,frontend=virtio,log="$tmp/daemon.log"
grep -q '^# disk disk.img: .* frontend=virtio queues=2 ' "$tmp/mnt/stats" ||
  fail "the mount(8) mount lacks its options: $(head -1 "$tmp/mnt/stats")"
cmp -n 4194304 "$tmp/data" "$tmp/mnt/disk.img" || fail "data read back differs"
umount "$tmp/mnt"

echo "deb_test: systemd-analyze verify pvdisk@.service"
unit=$(grep '/pvdisk@.service$' "$tmp/files")
[ -n "$unit" ] || fail "the package has no pvdisk@.service"
cp "$unit" "$tmp/pvdisk@test.service"
systemd-analyze verify "$tmp/pvdisk@test.service" 2>&1 | tee "$tmp/verify.log"
[ ! -s "$tmp/verify.log" ] || fail "systemd-analyze verify: $(cat "$tmp/verify.log")"

echo "deb_test: apt-get remove --purge pvdisk"
DEBIAN_FRONTEND=noninteractive apt-get remove --purge -y -q pvdisk >"$tmp/remove.log" 2>&1 ||
  { cat "$tmp/remove.log"; fail "apt-get remove failed"; }
installed=0
left=()
while read -r path; do
  [ "$path" = /. ] && continue
  [ -e "$path" ] || [ -L "$path" ] || continue
  # A folder other packages own too (/usr/bin, /usr/share/man/man1) stays.
  if [ -d "$path" ] && dpkg-query -S "$path" >/dev/null 2>&1; then continue; fi
  left+=("$path")
done <"$tmp/files"
[ ${#left[@]} -eq 0 ] || fail "left behind after purge: ${left[*]}"
echo "deb_test: 1 passed, 0 failed"
