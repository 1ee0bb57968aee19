#!/usr/bin/env bash
# The transport measurements, side by side in one run each:
#  1. random 4 KiB reads, iodepth 32, 2 jobs: 1 vs 4 queues
#  2. sequential 1 MiB reads: max segments 32 vs 256 (request size)
#  3. kicks and interrupts per request at iodepth 1 vs 32, event-idx vs always
#  4. random 4 KiB writes: persistent grants on vs off
# usage: examples/transport_report.sh [BUILD_DIR] [ROUNDS] [SECONDS]
set -euo pipefail
build=${1:-build}
rounds=${2:-3}
seconds=${3:-5}
lab() { "$(dirname "$0")/pvlab.py" --build "$build" --rounds "$rounds" --runtime "$seconds" "$@"; echo; }

echo "## 1. Queues"
lab --job "rw=randread bs=4k iodepth=32 numjobs=2" \
    --config "1 queue: --queues 1" --config "4 queues: --queues 4" \
    --counters inflight_max,engine_inflight_max,kicks_sent,irqs_sent

echo "## 2. Request size"
lab --job "rw=read bs=1m iodepth=4" \
    --config "max-segments 32: --max-segments 32" \
    --config "max-segments 256: --max-segments 256" \
    --counters reqs_read,sectors_read,splits,indirect_reqs

echo "## 3. Notifications"
for depth in 1 32; do
  lab --job "rw=randread bs=4k iodepth=$depth" \
      --config "event-idx qd$depth: --notify event-idx" \
      --config "always qd$depth: --notify always" \
      --counters reqs_read,kicks_sent,kicks_suppressed,irqs_sent,irqs_suppressed,final_check_again
done

echo "## 4. Persistent grants"
lab --job "rw=randwrite bs=4k iodepth=32" \
    --config "persistent on: --persistent on" \
    --config "persistent off: --persistent off" \
    --counters reqs_write,grant_maps,grant_unmaps
