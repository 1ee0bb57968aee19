#!/usr/bin/env bash
# `make fuzz`: runs every fuzz target of a fuzzing tree for SECONDS each,
# keeping each target's growing corpus and findings under
# BUILD/fuzz-work/NAME/, and ends with one line per target (executions,
# findings). Exit 1 if any target found something.
# Usage: run_all.sh BUILD SECONDS
set -uo pipefail
build=$1 seconds=$2
here=$(cd "$(dirname "$0")" && pwd)

summary=()
failed=0
for fuzzer in "$build"/tests/fuzz/fuzz_*; do
  [ -f "$fuzzer" ] && [ -x "$fuzzer" ] || continue
  name=$(basename "$fuzzer")
  name=${name#fuzz_}
  echo "== $name: $seconds s"
  out=$("$here/run_fuzzer.sh" "$fuzzer" "$here/corpus/$name" "$seconds" \
        "$build/fuzz-work/$name" 2>&1)
  [ $? -eq 0 ] || failed=1
  echo "$out"
  summary+=("$(head -1 <<<"$out")")
done
if [ ${#summary[@]} -eq 0 ]; then
  echo "no fuzz targets in $build/tests/fuzz: run 'make fuzz-build'" >&2
  exit 2
fi
echo "== fuzz summary (findings saved under $build/fuzz-work/NAME/findings/)"
printf '%s\n' "${summary[@]}"
exit $failed
