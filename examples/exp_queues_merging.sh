#!/usr/bin/env bash
# Experiment: queues and merging (docs/experiments.md, experiment 1).
# Sequential reads at 512 B .. 128 KiB, iodepth 32, numjobs = queues, on a
# small ring (32 slots) so that it fills: 1 vs 8 queues, merge on vs off.
# Each row: fio's numbers, ring requests per FUSE request, average request
# size, and the merge counters.
# The ring fills only with more requests than it has room for: a 4 KiB
# virtio request takes 3 of a 32-entry ring's descriptors, so virtio fills at
# iodepth 32; a blkif ring of 32 slots needs iodepth above 32 (QD=64).
# usage: [FRONTEND=virtio|blkif] [QD=32] examples/exp_queues_merging.sh [BUILD_DIR] [SECONDS] [ROUNDS]
set -euo pipefail
here=$(dirname "$0")
build=${1:-build}
seconds=${2:-3}
rounds=${3:-1}
frontend=${FRONTEND:-virtio}
qd=${QD:-32}
for bs in 512 4k 16k 64k 128k; do
  echo "### --frontend $frontend, bs=$bs, iodepth $qd per job"
  BS=$bs QD=$qd JOBS=1 "$here/pvlab.py" --build "$build" --jobfile "$here/jobs/seqread.fio" \
      --runtime "$seconds" --rounds "$rounds" \
      --config "1 queue, merge on: --frontend $frontend --queues 1 --ring-size 32 --merge on @ numjobs=1" \
      --config "1 queue, merge off: --frontend $frontend --queues 1 --ring-size 32 --merge off @ numjobs=1" \
      --config "8 queues, merge on: --frontend $frontend --queues 8 --ring-size 32 --merge on @ numjobs=8" \
      --config "8 queues, merge off: --frontend $frontend --queues 8 --ring-size 32 --merge off @ numjobs=8" \
      --counters fuse_reads,reqs_read,merges_read,ring_full,dispatch_busy,inflight_max
  echo
done
