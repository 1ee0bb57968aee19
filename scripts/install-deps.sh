#!/usr/bin/env bash
# Installs the Debian 12 packages pvdisk needs to build, test and run, and
# nothing else. Runs `apt-get update` once, and only when something is missing.
# Usage: scripts/install-deps.sh [run|test|bench]   (all install the same set)
set -euo pipefail

packages=(
  build-essential cmake pkg-config clang-format
  libfuse3-dev fuse3
  liburing-dev
  libabsl-dev
  libgtest-dev libgmock-dev googletest
  libbenchmark-dev
  fio
  python3          # examples/pvlab.py, bench/compare, bench/experiments, tests/bench
  qemu-system-common  # qemu-storage-daemon: bench/compare's peer, and the image-lock tests
  gnuplot-nox      # the PNG plots of bench/experiments and bench/trace_plot
  blktrace         # blkparse and btt: the tests of pvdisk trace read its files
  clang libclang-rt-14-dev  # tests/fuzz: clang++ with libFuzzer, ASan, UBSan
  llvm             # llvm-symbolizer: sanitizer reports with file:line
  librbd-dev librados-dev  # the rbd engine (--disk rbd:POOL/IMAGE)
  ceph-mon ceph-osd ceph-common  # scripts/ceph-cluster.sh: the RBD tests' cluster
  qemu-utils       # qemu-img, qemu-io: the independent judge of the qcow2 tests (tests/image)
  zlib1g-dev libzstd-dev  # the qcow2 compressed clusters: deflate and zstd
  qemu-block-extra  # qemu-storage-daemon's rbd driver: bench/compare --rbd
  linux-perf       # perf: bench/spans traces the io_uring and fuse tracepoints
  lintian          # tests/packaging: checks the Debian package `make deb` makes
  groff-base man-db  # docs.reference renders the man pages and checks for warnings
  sqlite3 e2fsprogs  # bench/compare --group latency's sqlite job, the loop-device ext4 tests
  prometheus       # promtool: the tests check the mount's metrics file with it
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -q
"${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
