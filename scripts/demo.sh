#!/usr/bin/env bash
# `make run`: mount a 1 GiB sparse image, drive it with fio through the
# mountpoint while `pvdisk stat` shows it live, show the stats, unmount.
# Everything lives under BUILD_DIR/demo.
set -euo pipefail
build=${1:-build}
demo="$build/demo"
pvdisk="$build/pvdisk"
image="$demo/disk0.img"
mnt="$demo/mnt"

mkdir -p "$demo" "$mnt"
if [ ! -f "$image" ]; then
  "$pvdisk" create "$image" --size 1G
fi
# A mount left over from an interrupted run is stopped first.
if grep -q " $(realpath "$mnt") fuse.pvdisk " /proc/self/mountinfo; then
  "$pvdisk" unmount "$mnt"
fi

echo "== pvdisk mount $mnt --disk $image"
"$pvdisk" mount "$mnt" --disk "$image"
trap '"$pvdisk" unmount "$mnt" >/dev/null 2>&1 || true' EXIT
ls -l "$mnt"

echo
echo "== fio: 4 KiB random writes then random reads, iodepth 32, io_uring, O_DIRECT, verified"
fio --name=demo --filename="$mnt/disk0.img" --ioengine=io_uring --direct=1 \
    --rw=randwrite --bs=4k --iodepth=32 --size=64M --verify=crc32c \
    --verify_state_save=0 --group_reporting --output-format=terse \
    --terse-version=3 >/dev/null
echo "   randwrite 64 MiB + crc32c verify: ok"
echo
echo "== fio: 4 KiB random reads, iodepth 32, 6 s; beside it pvdisk stat --queues"
fio --name=randread --filename="$mnt/disk0.img" --ioengine=io_uring --direct=1 \
    --rw=randread --bs=4k --iodepth=32 --size=1G --time_based --runtime=6 \
    --group_reporting >"$demo/fio.out" &
fio_pid=$!
sleep 1
"$pvdisk" stat "$mnt" --interval 1 --count 5 --queues
wait "$fio_pid"
echo "== fio's own view"
grep -E "IOPS|lat \(usec\).*avg" "$demo/fio.out" | head -3

echo
echo "== pvdisk list"
"$pvdisk" list

echo
echo "== cat $mnt/stats"
cat "$mnt/stats"

echo
echo "== pvdisk unmount $mnt"
trap - EXIT
"$pvdisk" unmount "$mnt"
