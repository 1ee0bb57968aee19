#!/usr/bin/env bash
# scripts/attach-check.sh (make attach-check): fio's largest completion
# latency on disk A while disk B is attached and detached ATTACH_CYCLES (50)
# times, beside the same fio run without any attach (the baseline), on the
# inline and the backend-thread placement, ROUNDS times side by side. The
# cycle runs fail if fio saw an error or a completion slower than
# ATTACH_MAX_MS (100 ms), or if fewer cycles fit in ATTACH_FIO_SECONDS (60)
# of fio.
#
# It runs the suite's test (fuse_test AttachCycleTest) with its figures
# raised: PVDISK_ATTACH_CYCLES, PVDISK_ATTACH_FIO_SECONDS and
# PVDISK_ATTACH_MAX_CLAT_MS. Exit status: 0 every run passed, 1 one failed.
#
#   scripts/attach-check.sh [BUILD_DIR] [ROUNDS]   # build, 2
set -u
build=${1:-build}
rounds=${2:-2}
cycles=${ATTACH_CYCLES:-50}
seconds=${ATTACH_FIO_SECONDS:-60}
max_ms=${ATTACH_MAX_MS:-100}
test_binary="$build/tests/fuse/fuse_test"
if [[ ! -x $test_binary ]]; then
  echo "attach-check: no $test_binary (cmake --build $build --target fuse_test)" >&2
  exit 2
fi
status=0
printf '%-6s %-15s %-9s %7s %12s %s\n' round placement run cycles max_clat_ms result
for round in $(seq 1 "$rounds"); do
  for placement in inline backendthread; do
    for run in baseline cycles; do
      n=$cycles
      bound=()
      if [[ $run == baseline ]]; then n=0; else bound=(PVDISK_ATTACH_MAX_CLAT_MS=$max_ms); fi
      out=$(env PVDISK_ATTACH_CYCLES=$n PVDISK_ATTACH_FIO_SECONDS=$seconds "${bound[@]}" \
        "$test_binary" --gtest_filter="Placements/AttachCycleTest.*/$placement" 2>&1)
      rc=$?
      line=$(grep -o 'fio on a.img: [0-9]* attach/detach cycles of b.img, max clat [0-9.]* ms' <<<"$out")
      done_cycles=$(sed -E 's/.*: ([0-9]+) attach.*/\1/' <<<"$line")
      clat=$(sed -E 's/.*max clat ([0-9.]+) ms/\1/' <<<"$line")
      result=pass
      if [[ $rc -ne 0 || ( $run == cycles && ${done_cycles:-0} -lt $n ) ]]; then
        result=FAIL
        status=1
      fi
      printf '%-6s %-15s %-9s %7s %12s %s\n' "$round" "$placement" "$run" \
        "${done_cycles:-?}" "${clat:-?}" "$result"
    done
  done
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
exit $status
