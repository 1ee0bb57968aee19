#!/usr/bin/env bash
# Random 4 KiB reads at iodepth 32 through pvdisk vs the same job on the image
# file itself, side by side in one run (docs/PERFORMANCE.md: ratios, not
# absolute numbers): bench/compare's rr4k_qd32 row on those two targets,
# with the median over the rounds and pvdisk's counters.
#
# usage: examples/rr4k_vs_native.sh [BUILD_DIR] [ROUNDS] [SECONDS] [pvdisk mount flags...]
set -euo pipefail
build=${1:-build}
rounds=${2:-3}
seconds=${3:-5}
shift $(( $# > 3 ? 3 : $# )) || true
exec "$(dirname "$0")/../bench/compare" --build "$build" --rounds "$rounds" \
    --runtime "$seconds" --targets native,pvdisk --jobs rr4k_qd32 \
    --pvdisk-flags="$*"
