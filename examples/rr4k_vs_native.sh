#!/usr/bin/env bash
# Random 4 KiB reads at iodepth 32 through pvdisk vs the same job on the image
# file itself, side by side in one run (design/BENCHMARKING.md: ratios, not
# absolute numbers). Prints each round, the median ratio, and the stats.
#
# usage: examples/rr4k_vs_native.sh [BUILD_DIR] [ROUNDS] [SECONDS] [pvdisk mount flags...]
set -euo pipefail
build=${1:-build}
rounds=${2:-3}
seconds=${3:-5}
shift $(( $# > 3 ? 3 : $# )) || true
pvdisk="$build/pvdisk"
work=$(mktemp -d /tmp/pvdisk-rr4k.XXXXXX)
image="$work/disk0.img"
mnt="$work/mnt"
mkdir -p "$mnt"
cleanup() {
  "$pvdisk" unmount "$mnt" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

"$pvdisk" create "$image" --size 1G >/dev/null
# Random data, so that reads hit allocated blocks, not holes.
fio --name=fill --filename="$image" --rw=write --bs=1m --size=1G --direct=1 \
    --ioengine=io_uring --refill_buffers --output-format=terse >/dev/null
"$pvdisk" mount "$mnt" --disk "$image" "$@" >/dev/null

job=(--name=rr4k_qd32 --ioengine=io_uring --direct=1 --rw=randread --bs=4k
     --iodepth=32 --time_based --runtime="$seconds" --group_reporting
     --output-format=json)
iops() { python3 -c 'import json,sys; print(round(json.load(sys.stdin)["jobs"][0]["read"]["iops"]))'; }

ratios=()
printf '%-6s %12s %12s %8s\n' round native pvdisk ratio
for r in $(seq 1 "$rounds"); do
  native=$(fio "${job[@]}" --filename="$image" | iops)
  echo reset > "$mnt/stats"
  mounted=$(fio "${job[@]}" --filename="$mnt/disk0.img" | iops)
  ratio=$(python3 -c "print(f'{$mounted/$native:.2f}')")
  ratios+=("$ratio")
  printf '%-6s %12s %12s %8s\n' "$r" "$native" "$mounted" "$ratio"
done
median=$(printf '%s\n' "${ratios[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
echo "median pvdisk/native: $median"
echo
echo "stats of the last pvdisk round:"
cat "$mnt/stats"
