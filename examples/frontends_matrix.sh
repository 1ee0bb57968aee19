#!/usr/bin/env bash
# The standard matrix of design/BENCHMARKING.md on both frontends, side by
# side in one run: blkif vs virtio (default settings otherwise), with kicks
# and interrupts per ring request from the counters.
# usage: examples/frontends_matrix.sh [BUILD_DIR] [SECONDS] [ROUNDS]
set -euo pipefail
here=$(dirname "$0")
build=${1:-build}
seconds=${2:-5}
rounds=${3:-1}
declare -A jobs=(
  [rr4k_qd1]="rw=randread bs=4k iodepth=1"
  [rr4k_qd32]="rw=randread bs=4k iodepth=32"
  [rr4k_2x32]="rw=randread bs=4k iodepth=32 numjobs=2"
  [rw4k_qd32]="rw=randwrite bs=4k iodepth=32"
  [sr128k_qd8]="rw=read bs=128k iodepth=8"
  [sw1m_qd4]="rw=write bs=1m iodepth=4"
)
for name in rr4k_qd1 rr4k_qd32 rr4k_2x32 rw4k_qd32 sr128k_qd8 sw1m_qd4; do
  echo "### $name"
  "$here/pvlab.py" --build "$build" --job "${jobs[$name]}" \
      --runtime "$seconds" --rounds "$rounds" \
      --config "native: native" \
      --config "blkif: --frontend blkif" \
      --config "virtio: --frontend virtio" \
      --counters kicks_sent,kicks_suppressed,irqs_sent,irqs_suppressed,indirect_reqs
  echo
done
