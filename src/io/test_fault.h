// Test-only faults, reached only through the environment, never through
// pvdisk's documented interface (no flag, no --disk option, no effect on the
// placement). The test suite sets
//
//   PVDISK_TEST_FAULT=FAULT[,FAULT...]
//   FAULT: hang=SECTOR | fail=N | fanout | lying-flush
//
// in the environment of `pvdisk mount`; the daemon and its backend
// processes inherit it, and WrapEngine (engine_factory.h) applies it to every
// engine the process creates:
//
// - hang=SECTOR (a 512-byte sector number): each read, write, discard or
//   write-zeroes touching SECTOR is held forever (hanging_engine.h), to test
//   that shutdown gives up on I/O after --shutdown-timeout.
// - fail=N (N >= 1): the engine fails as a whole at the process's N-th
//   submission, counted over all its engines, once (failing_engine.h), to
//   test that a backend replaces a failed engine. An engine on a lent ring
//   (the inline placement) is left alone: it never fails as a whole, since
//   its ring's owner submits and reaps for it, and replacing it would need
//   that owner to wait for itself.
// - fanout: every read and write becomes two engine I/Os issued one after
//   the other, a 512-byte read of the first sector of the request's file,
//   then the request's own I/O, and completes with the second
//   (WrapWithTestFanout), as a format layer reads its metadata before the
//   data. Tests that the loops driving engines count progress without a
//   completion as work (io_engine.h, IoEngine::Run). The decorator sits
//   right over the file engine, where a format's would.
// - lying-flush: a disk with cache=volatile completes every flush without
//   writing its cache out (volatile_cache.h), so the writes it covers stay
//   at risk: the negative control of the power-cut tests, which must then
//   find fsynced data lost. The daemon reads it when it makes the cache.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

#include "absl/status/statusor.h"
#include "io/failing_engine.h"
#include "io/io_engine.h"

namespace pvdisk::io {

inline constexpr char kTestFaultVariable[] = "PVDISK_TEST_FAULT";

struct TestFault {
  std::optional<uint64_t> hang_sector;  // hang=SECTOR
  std::optional<uint64_t> fail_at;      // fail=N
  bool fanout = false;                  // fanout
  bool lying_flush = false;             // lying-flush
};

// Parses the variable's value (see above). Anything else is InvalidArgument
// naming the variable, what was wrong and the forms allowed.
absl::StatusOr<TestFault> ParseTestFault(std::string_view text);

// The faults PVDISK_TEST_FAULT asks for: none when it is unset.
absl::StatusOr<TestFault> TestFaultFromEnvironment();

// The one trigger of fail=N in this process, shared by every engine it
// creates (so that exactly one failure happens in all); made on first use
// with `fail_at`.
std::shared_ptr<EngineFailTrigger> ProcessFailTrigger(uint64_t fail_at);

// The decorator of `fanout` around `inner`, with room for `capacity`
// requests in flight (the inner engine's depth plus its extra I/Os). It is
// test code, no feature of pvdisk: it lives with the tests
// (tests/io/test_fanout_engine.cc), which the I/O library compiles in so
// that a real mount can use it.
std::unique_ptr<IoEngine> WrapWithTestFanout(std::unique_ptr<IoEngine> inner,
                                             uint32_t capacity);

}  // namespace pvdisk::io
