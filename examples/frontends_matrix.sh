#!/usr/bin/env bash
# The standard matrix (docs/PERFORMANCE.md) on the three frontends, side
# by side in one run: blkif vs virtio vs virtio-packed (default settings
# otherwise), with kicks
# and interrupts per ring request from the counters. The matrix itself is
# bench/pvbench's (pvlab.py --matrix), the one bench/compare runs.
# usage: examples/frontends_matrix.sh [BUILD_DIR] [SECONDS] [ROUNDS]
set -euo pipefail
here=$(dirname "$0")
exec "$here/pvlab.py" --build "${1:-build}" --runtime "${2:-5}" --rounds "${3:-1}" \
    --matrix \
    --config "native: native" \
    --config "blkif: --frontend blkif" \
    --config "virtio: --frontend virtio" \
    --config "virtio-packed: --frontend virtio-packed" \
    --counters kicks_sent,kicks_suppressed,irqs_sent,irqs_suppressed,indirect_reqs
