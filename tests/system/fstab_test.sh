#!/usr/bin/env bash
# mount(8) and /etc/fstab: a line `IMG:IMG,ro MNT fuse.pvdisk OPTIONS` in a
# temporary fstab, mounted with `mount -T FSTAB MNT`, goes through
# mount.fuse3 to pvdisk's helper entry point: both disks are served with the
# flags the options name, fio verifies what it writes, `umount MNT` ends the
# daemon, and a new mount of the image (its lock free again) reads back what
# fio wrote. A bad option is refused with one line naming the allowed ones,
# and nothing is mounted.
#
# mount(8) runs its helpers with no PATH, so mount.fuse3 finds `pvdisk` only
# in /usr/local/sbin, /usr/sbin, ...: the test runs in a mount namespace of
# its own where a folder holding the built pvdisk is bind-mounted on
# /usr/local/sbin. Nothing of it is seen outside, and nothing is installed.
# Usage: fstab_test.sh PVDISK
set -euo pipefail
pvdisk=$(realpath "$1")
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "mount -T needs root"
for tool in unshare mount.fuse3 fio; do
  command -v $tool >/dev/null || skip "$tool not found"
done
[ -w /dev/fuse ] || skip "/dev/fuse not usable"

if [ "${PVDISK_FSTAB_TEST_INSIDE:-}" != 1 ]; then
  PVDISK_FSTAB_TEST_INSIDE=1 exec unshare --mount --propagation private \
    bash "$0" "$pvdisk"
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/pvdisk-fstab-test.XXXXXX")
mnt=$tmp/mnt
cleanup() {
  status=$?
  if mountpoint -q "$mnt"; then umount "$mnt" || fusermount3 -u "$mnt" || true; fi
  umount /usr/local/sbin 2>/dev/null || true
  rm -rf "$tmp"
  exit $status
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

mkdir "$mnt" "$tmp/bin"
ln -s "$pvdisk" "$tmp/bin/pvdisk"
mount --bind "$tmp/bin" /usr/local/sbin
"$pvdisk" create "$tmp/a.img" --size 16M >/dev/null
"$pvdisk" create "$tmp/b.img" --size 8M >/dev/null
log=$tmp/daemon.log

daemon_pid() {
  awk -v m="$mnt" '$2 == m { sub("pvdisk-", "", $1); print $1 }' /proc/self/mounts
}
fio_job() {
  fio --name=fstab --filename="$mnt/a.img" --rw=randwrite --bs=4k --size=8M \
    --direct=1 --ioengine=io_uring --iodepth=8 --verify=crc32c \
    --verify_fatal=1 --randseed=4242 --output="$tmp/fio.out" "$@" ||
    { cat "$tmp/fio.out"; fail "fio $*"; }
}

# A bad option: one line naming what is allowed, exit status non-zero,
# nothing mounted.
echo "$tmp/a.img $mnt fuse.pvdisk queues=4,no_such_option=1 0 0" >"$tmp/fstab"
if mount -T "$tmp/fstab" "$mnt" 2>"$tmp/err"; then fail "a bad option was mounted"; fi
grep -q "unknown mount option 'no_such_option=1'; allowed: .*queues=N" "$tmp/err" ||
  fail "bad option message: $(cat "$tmp/err")"
[ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "more than one line: $(cat "$tmp/err")"
! mountpoint -q "$mnt" || fail "mounted after a refused option"

echo "$tmp/a.img:$tmp/b.img,ro $mnt fuse.pvdisk queues=4,frontend=virtio,shutdown_timeout=10,log=$log,nofail 0 0" >"$tmp/fstab"
mount -T "$tmp/fstab" "$mnt" || fail "mount -T failed"
mountpoint -q "$mnt" || fail "not mounted"
[ -f "$mnt/a.img" ] && [ -f "$mnt/b.img" ] || fail "the disks are missing: $(ls "$mnt")"
grep -q '^# disk b.img: .* read_only=yes ' "$mnt/stats" || fail "b.img,ro is not read-only"
header=$(grep '^# disk a.img' "$mnt/stats")
for want in frontend=virtio queues=4; do
  [[ $header == *" $want "* ]] || fail "stats header lacks $want: $header"
done
pid=$(daemon_pid)
tr '\0' ' ' </proc/"$pid"/cmdline | grep -q "mount $mnt --disk $tmp/a.img --disk $tmp/b.img,ro --queues=4" ||
  fail "daemon command line: $(tr '\0' ' ' </proc/"$pid"/cmdline)"
fio_job --do_verify=1

umount "$mnt" || fail "umount failed"
# The daemon ends once its mount is gone; 10 s at most (its shutdown timeout).
for _ in $(seq 100); do [ -d "/proc/$pid" ] || break; sleep 0.1; done
[ ! -d "/proc/$pid" ] || fail "daemon $pid still runs after umount"
! grep -qi "error\|abandon" "$log" || fail "daemon log: $(cat "$log")"

# The lock is free and the data is in the image.
"$pvdisk" mount "$mnt" --disk "$tmp/a.img" --log "$log" >/dev/null
fio_job --verify_only
"$pvdisk" unmount "$mnt" >/dev/null
echo "fstab_test: 1 passed, 0 failed"
