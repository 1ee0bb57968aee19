# The two commands a new user runs (see README.md):
#   make run   installs what is missing, builds, mounts a 1 GiB image, drives
#              it with fio, shows the stats, unmounts
#   make test  installs what is missing, builds, runs the whole suite (ctest)
BUILD_DIR ?= build
JOBS ?= $(shell nproc)

.PHONY: all deps build run test format clean

all: build

deps:
	@scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build $(BUILD_DIR) -j $(JOBS)

run: build
	@scripts/demo.sh $(BUILD_DIR)

test: build
	@cd $(BUILD_DIR) && ctest --output-on-failure --timeout 600 -j 1

format:
	@find src tests bench -name '*.h' -o -name '*.cc' | xargs clang-format -i

clean:
	@rm -rf $(BUILD_DIR)
