#!/usr/bin/env bash
# Experiment: queues and merging (BENCHMARKING.md experiment 1, issue 5).
# Sequential reads at 512 B .. 128 KiB, iodepth 32, numjobs = queues, on a
# small ring (32 slots) so that it fills: 1 vs 8 queues, merge on vs off.
# Each row: fio's numbers, ring requests per FUSE request, average request
# size, and the merge counters.
# usage: examples/exp_queues_merging.sh [BUILD_DIR] [SECONDS] [ROUNDS]
set -euo pipefail
here=$(dirname "$0")
build=${1:-build}
seconds=${2:-3}
rounds=${3:-1}
for bs in 512 4k 16k 64k 128k; do
  echo "### bs=$bs"
  BS=$bs QD=32 JOBS=1 "$here/pvlab.py" --build "$build" --jobfile "$here/jobs/seqread.fio" \
      --runtime "$seconds" --rounds "$rounds" \
      --config "1 queue, merge on: --queues 1 --ring-size 32 --merge on @ numjobs=1" \
      --config "1 queue, merge off: --queues 1 --ring-size 32 --merge off @ numjobs=1" \
      --config "8 queues, merge on: --queues 8 --ring-size 32 --merge on @ numjobs=8" \
      --config "8 queues, merge off: --queues 8 --ring-size 32 --merge off @ numjobs=8" \
      --counters fuse_reads,reqs_read,merges_read,ring_full,dispatch_busy,inflight_max
  echo
done
