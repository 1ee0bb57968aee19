#!/usr/bin/env bash
# Experiment: dispatch policy (docs/experiments.md, experiment 3).
# Sequential 4 KiB writes on a 32-slot ring, one queue: --dispatch when-room
# (requests stay mergeable while the ring is full) vs always (taken out at
# once, waiting where nothing merges), and merging off as the baseline.
# virtio at iodepth 32 fills its ring (a 4 KiB request takes 3 of its 32
# descriptors); blkif needs iodepth 64 to have more requests than slots.
# usage: examples/exp_dispatch.sh [BUILD_DIR] [SECONDS] [ROUNDS]
set -euo pipefail
here=$(dirname "$0")
build=${1:-build}
seconds=${2:-4}
rounds=${3:-1}
for frontend_qd in "virtio 32" "blkif 32" "blkif 64"; do
  set -- $frontend_qd
  echo "### --frontend $1, iodepth $2"
  QD=$2 "$here/pvlab.py" --build "$build" --jobfile "$here/jobs/seqwrite4k.fio" \
      --runtime "$seconds" --rounds "$rounds" \
      --config "when-room: --frontend $1 --queues 1 --ring-size 32 --dispatch when-room" \
      --config "always: --frontend $1 --queues 1 --ring-size 32 --dispatch always" \
      --config "merge off: --frontend $1 --queues 1 --ring-size 32 --merge off" \
      --counters fuse_writes,reqs_write,merges_write,ring_full,dispatch_busy
  echo
done
