// The transport's flags of pvdisk mount (--frontend, --ring-size,
// --max-segments, --queues, --backend-threads, --queue-map, --poll-us,
// --engine-max-inflight, --merge, --dispatch, --plug-us, --persistent,
// --notify, --irq, --nvme-data, --irq-coalesce): read, each checked against its
// range or words, and the result checked as a whole (ValidateTransportOptions).
// Pure: no file, no thread; the messages name the flag and what is allowed.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "base/flag_values.h"
#include "transport/transport.h"

namespace pvdisk::transport {

// --queues when not given.
inline constexpr uint32_t kDefaultQueues = 2;
// --poll-us, --plug-us and --engine-max-inflight at most.
inline constexpr uint64_t kMaxPollUs = 1000000;
inline constexpr uint64_t kMaxPlugUs = 100000;
inline constexpr uint64_t kMaxEngineInflight = 1u << 20;

// The transport as `flags` set it (placement: backend threads; the
// placement is decided later, cli::DecidePlacement).
absl::StatusOr<TransportOptions> TransportOptionsFromFlags(
    const FlagValues& flags);

}  // namespace pvdisk::transport
