# The two commands a new user runs (see README.md):
#   make run   installs what is missing, builds only the pvdisk binary, mounts
#              a 1 GiB image, drives it with fio while `pvdisk stat` watches,
#              shows the stats, unmounts
#   make test  installs what is missing, builds, runs the whole suite (ctest)
#   make bench installs what is missing, builds, runs the microbenchmarks,
#              bench/compare and bench/experiments; results go to results/
#   make fuzz  builds the libFuzzer targets (clang, in FUZZ_BUILD_DIR) and
#              runs each for FUZZ_SECONDS; `make test` runs each briefly
#   make install  builds pvdisk, its man pages and completion and installs
#              them (PREFIX, default /usr/local; DESTDIR as usual)
#   make deb   builds the Debian package build/pvdisk_VERSION_ARCH.deb
#   make deb-test  builds it, checks it with lintian, installs it with apt-get,
#              mounts with /usr/bin/pvdisk, purges it (as root; restores the
#              machine on failure too)
#   make tsan  builds pvdisk and the FUSE tests with ThreadSanitizer (in
#              TSAN_BUILD_DIR) and runs the FUSE tests named tsan.* there;
#              a report from any process fails it (not part of `make test`)
BUILD_DIR ?= build
JOBS ?= $(shell nproc)
CTEST_JOBS ?= 4
RESULTS ?= results
STAMP := $(shell date +%Y%m%d-%H%M%S)
# Seconds per microbenchmark (libbenchmark's --benchmark_min_time).
MICRO_MIN_TIME ?= 0.1
# Options for bench/compare and bench/experiments, e.g. ARGS="--runtime 1".
ARGS ?=
# The fuzzing tree (clang, libFuzzer + ASan + UBSan) and seconds per target.
FUZZ_BUILD_DIR ?= build-fuzz
FUZZ_SECONDS ?= 60
# The ThreadSanitizer tree, and the tests it runs at a time (each is slowed
# several times over by TSan; on 2 CPUs more at once only wait longer).
TSAN_BUILD_DIR ?= build-tsan
TSAN_CTEST_JOBS ?= 2
# Where `make install` puts pvdisk (/usr: /usr/bin/pvdisk).
PREFIX ?= /usr/local

.PHONY: all deps build build-pvdisk run test ctest-jobs format clean fuzz fuzz-build
.PHONY: tsan tsan-build install deb deb-test
.PHONY: bench bench-micro bench-compare bench-experiments
.PHONY: powercut-check crash-check attach-check

all: build

deps:
	@scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=Release \
	  -DPVDISK_FUZZ_BUILD_DIR=$(abspath $(FUZZ_BUILD_DIR)) >/dev/null
	@cmake --build $(BUILD_DIR) -j $(JOBS)

# Only what the demo needs: the pvdisk binary, not the test suite.
build-pvdisk: deps
	@cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=Release \
	  -DPVDISK_FUZZ_BUILD_DIR=$(abspath $(FUZZ_BUILD_DIR)) >/dev/null
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target pvdisk

# The binary and the files the build writes from its tables, installed
# (packaging/CMakeLists.txt lists them). The tests are not built.
install: deps
	@cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=Release \
	  -DCMAKE_INSTALL_PREFIX=$(PREFIX) \
	  -DPVDISK_FUZZ_BUILD_DIR=$(abspath $(FUZZ_BUILD_DIR)) >/dev/null
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target pvdisk man package-changelog
	@cmake --install $(BUILD_DIR)

# The same files as a Debian package (CPack), in BUILD_DIR.
deb: deps
	@cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=Release \
	  -DPVDISK_FUZZ_BUILD_DIR=$(abspath $(FUZZ_BUILD_DIR)) >/dev/null
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target pvdisk man package-changelog
	@rm -f $(BUILD_DIR)/pvdisk_*.deb
	@cd $(BUILD_DIR) && cpack -G DEB

deb-test: deb
	@tests/system/deb_test.sh $(BUILD_DIR)

# Only the fuzz targets, each from the few sources it tests (tests/fuzz/).
fuzz-build: deps
	@cmake -S . -B $(FUZZ_BUILD_DIR) -DCMAKE_BUILD_TYPE=Release \
	  -DCMAKE_CXX_COMPILER=clang++ -DPVDISK_FUZZ=ON >/dev/null
	@cmake --build $(FUZZ_BUILD_DIR) -j $(JOBS) --target fuzzers

fuzz: fuzz-build
	@tests/fuzz/run_all.sh $(FUZZ_BUILD_DIR) $(FUZZ_SECONDS)

# The daemon is a child of the test program, and detached: its stderr goes
# nowhere. So every process writes its reports to TSAN_LOGS/report.PID
# (log_path; a test program moves its children to report-ITS_PID.PID)
# and stops at the first (halt_on_error); the tests fail on a
# report of the daemons they mount (tests/fuse/tsan_reports.h), and any
# report file left at the end fails the target. tests/tsan.supp holds the
# suppressions, each with its reason.
TSAN_LOGS = $(abspath $(TSAN_BUILD_DIR))/tsan-logs
tsan-build: deps
	@cmake -S . -B $(TSAN_BUILD_DIR) -DCMAKE_BUILD_TYPE=Release \
	  -DPVDISK_TSAN=ON -DPVDISK_BUILD_BENCH=OFF >/dev/null
	@cmake --build $(TSAN_BUILD_DIR) -j $(JOBS) --target pvdisk fuse_test

tsan: tsan-build
	@rm -rf $(TSAN_LOGS) && mkdir -p $(TSAN_LOGS)
	@cd $(TSAN_BUILD_DIR) && \
	  TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1 log_path=$(TSAN_LOGS)/report suppressions=$(abspath tests/tsan.supp)" \
	  ctest -R '^tsan\.' --output-on-failure --timeout 900 -j $(TSAN_CTEST_JOBS); \
	  status=$$?; \
	  for report in $(TSAN_LOGS)/report*; do \
	    [ -e "$$report" ] || continue; \
	    echo "make tsan: ThreadSanitizer report $$report:"; cat "$$report"; \
	    status=1; \
	  done; \
	  exit $$status

run: build-pvdisk
	@scripts/demo.sh $(BUILD_DIR)

# The ctest tests fuzz.NAME run the fuzzing tree's targets a few seconds each.
# ctest runs CTEST_JOBS tests at a time: most of a FUSE test's time is
# waiting (mounts, fio's start-up). The whole run took 437 s at 4, with
# no timings of its own, on 2 CPUs shared with a Ceph benchmark (load
# average 2-8.5; measured 2026-12-06).
# The tests that time or count what a CPU does are marked RUN_SERIAL and run
# alone, last; tests/CMakeLists.txt says how tests are scheduled.
test: ctest-jobs build fuzz-build
	@cd $(BUILD_DIR) && ctest --output-on-failure --timeout 600 -j $(CTEST_JOBS)

# ctest takes any -j value silently (a word runs one test at a time): check
# CTEST_JOBS before anything is built.
ctest-jobs:
	@case "$(CTEST_JOBS)" in ''|*[!0-9]*|0) \
	  echo "make test: CTEST_JOBS must be a whole number of tests at a time, 1 or more (got '$(CTEST_JOBS)')" >&2; \
	  exit 2;; esac

format:
	@find src tests bench -name '*.h' -o -name '*.cc' | xargs clang-format -i

clean:
	@rm -rf $(BUILD_DIR) $(FUZZ_BUILD_DIR) $(TSAN_BUILD_DIR)

# Every executable in BUILD_DIR/bench/, each writing its JSON to results/.
define run_micro
	@mkdir -p $(RESULTS)
	@for b in $(BUILD_DIR)/bench/*; do \
	  if [ -f "$$b" ] && [ -x "$$b" ]; then \
	    echo "== $$b"; \
	    "$$b" --benchmark_min_time=$(MICRO_MIN_TIME) \
	      --benchmark_out=$(RESULTS)/micro-$$(basename "$$b")-$(STAMP).json \
	      --benchmark_out_format=json || exit 1; \
	  fi; \
	done
endef
define run_compare
	@echo "== bench/compare $(ARGS)"
	@bench/compare --build $(BUILD_DIR) --out $(RESULTS) $(ARGS)
endef
define run_experiments
	@echo "== bench/experiments $(ARGS)"
	@bench/experiments --build $(BUILD_DIR) --out $(RESULTS)/experiments-$(STAMP) $(ARGS)
endef

bench: build
	$(run_micro)
	$(run_compare)
	$(run_experiments)

bench-micro: build
	$(run_micro)

bench-compare: build
	$(run_compare)

bench-experiments: build
	$(run_experiments)

# Attach and detach at full count (scripts/attach-check.sh); the suite runs
# a few cycles per placement.
ATTACH_CYCLES ?= 50
ATTACH_ROUNDS ?= 2
ATTACH_MAX_MS ?= 100
attach-check: build
	@ATTACH_CYCLES=$(ATTACH_CYCLES) ATTACH_MAX_MS=$(ATTACH_MAX_MS) \
	  scripts/attach-check.sh $(BUILD_DIR) $(ATTACH_ROUNDS)

# The power-cut promise at full count: POWERCUT_CUTS random cuts (default
# 200) of the first frontend and placement, then the negative control
# (tests/fuse/powercut_test.cc); the suite runs one cut per case. Then
# POWERCUT_QCOW2_CUTS cuts (default 20) of each qcow2 case, judged by
# qemu-img (tests/image/qcow2_powercut_test.cc).
POWERCUT_CUTS ?= 200
POWERCUT_QCOW2_CUTS ?= 20
powercut-check: build
	@cd $(BUILD_DIR) && PVDISK_POWERCUT_CUTS=$(POWERCUT_CUTS) ./tests/fuse/fuse_test \
	  --gtest_filter='FrontendsAndPlacements/PowercutPromiseTest.*/blkif_backend_thread:PowercutNegativeControlTest.*'
	@cd $(BUILD_DIR) && PVDISK_POWERCUT_CUTS=$(POWERCUT_QCOW2_CUTS) \
	  ./tests/image/qcow2_powercut_test

# ext4 and sqlite3 as the judges of power cuts at full count (as root):
# CRASH_CUTS cuts of ext4 under a CrashMonkey-style workload (default 100)
# and CRASH_SQLITE_CUTS of sqlite3 in each journal mode (default 40), by
# bench/crashcheck; its last line is the summary. The suite runs a few.
CRASH_CUTS ?= 100
CRASH_SQLITE_CUTS ?= 40
crash-check: build
	@bench/crashcheck --build $(BUILD_DIR) --cuts $(CRASH_CUTS) \
	  --sqlite-cuts $(CRASH_SQLITE_CUTS)
