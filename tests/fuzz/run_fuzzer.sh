#!/usr/bin/env bash
# Runs one libFuzzer target: replays its seed corpus, then fuzzes for SECONDS.
# Usage: run_fuzzer.sh FUZZER SEEDS SECONDS [WORK] [-- LIBFUZZER_FLAGS...]
#   FUZZER  a fuzz_NAME binary of a PVDISK_FUZZ=ON tree (build-fuzz/)
#   SEEDS   its committed seed corpus, tests/fuzz/corpus/NAME/ (only read)
#   WORK    where the growing corpus (WORK/corpus/) and the findings
#           (WORK/findings/) stay; a temporary folder, removed, if not given
# Prints "NAME: N execs in S s (R/s), F findings, corpus C inputs" and for a
# finding the sanitizer's report and the saved input. Exit 0 without
# findings, 1 with, 2 for usage errors.
set -uo pipefail

if [ $# -lt 3 ]; then
  echo "usage: $0 FUZZER SEEDS SECONDS [WORK] [-- LIBFUZZER_FLAGS...]" >&2
  exit 2
fi
fuzzer=$1 seeds=$2 seconds=$3
shift 3
work=""
if [ $# -gt 0 ] && [ "$1" != "--" ]; then work=$1; shift; fi
if [ $# -gt 0 ] && [ "$1" = "--" ]; then shift; fi
name=$(basename "$fuzzer")
name=${name#fuzz_}

if [ ! -x "$fuzzer" ]; then
  echo "$name: no fuzzer at $fuzzer: build it with 'make fuzz-build'" >&2
  exit 2
fi
if [ ! -d "$seeds" ]; then
  echo "$name: no seed corpus at $seeds" >&2
  exit 2
fi
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -lt 1 ]; then
  echo "$name: SECONDS must be a whole number of at least 1, not '$seconds'" >&2
  exit 2
fi

if [ -z "$work" ]; then
  work=$(mktemp -d "${TMPDIR:-/tmp}/pvdisk-fuzz-$name.XXXXXX")
  trap 'rm -rf "$work"' EXIT
fi
mkdir -p "$work/corpus" "$work/findings"
log="$work/fuzz.log"
before=$(find "$work/findings" -type f | wc -l)

# A 16 MiB quarantine (ASan's default is 256 MiB) still catches a use after
# free within a run, and spares the page faults of cycling through 256 MiB:
# about a third more runs per second for the ring targets.
export ASAN_OPTIONS=${ASAN_OPTIONS:-quarantine_size_mb=16}

# -timeout: an input that runs this long is a hang, and a finding.
# -max_len: 1 KiB holds a ring script of about 60 steps (a full 256-entry
# ring of requests, or a dozen requests with their data); longer inputs only
# make each run slower. A qcow2 input is an image file: 8 KiB holds one of
# 512-byte clusters with its header, refcount table and block, L1 and L2
# tables and a few data clusters; 112 KiB one of 16 KiB clusters, the
# smallest extended L2 entries (subclusters) allow.
max_len=1024
case $name in qcow2*) max_len=114688 ;; esac
start=$(date +%s)
"$fuzzer" -max_total_time="$seconds" -timeout=25 -rss_limit_mb=2048 \
  -max_len="$max_len" \
  -print_final_stats=1 -artifact_prefix="$work/findings/" "$@" \
  "$work/corpus" "$seeds" >"$log" 2>&1
status=$?
elapsed=$(( $(date +%s) - start ))

execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
execs=${execs:-0}
rate=$(( execs / (elapsed > 0 ? elapsed : 1) ))
found=$(find "$work/findings" -type f | wc -l)
findings=$(( found - before ))
inputs=$(find "$work/corpus" -type f | wc -l)
echo "$name: $execs execs in $elapsed s ($rate/s), $findings findings," \
  "corpus $inputs inputs"

if [ "$status" -ne 0 ] || [ "$findings" -gt 0 ]; then
  # The sanitizer's or FUZZ_CHECK's report, and where the input was saved.
  grep -v '^#\|^INFO:\|^stat::\|NEW_FUNC\|^ *0x[0-9a-f]*: ' "$log" | tail -60
  if [ "$findings" -gt 0 ]; then
    # The input itself, in case WORK is a temporary folder.
    for f in $(ls -t "$work/findings" | head -n "$findings"); do
      echo "  saved: $work/findings/$f"
      echo "  base64: $(head -c 4096 "$work/findings/$f" | base64 -w0)"
    done
  fi
  [ "$findings" -gt 0 ] || echo "$name: libFuzzer exited with $status"
  exit 1
fi
exit 0
