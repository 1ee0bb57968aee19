#include "stats/iostat.h"

namespace pvdisk::stats {
namespace {

double Ratio(double numerator, double denominator) {
  return denominator > 0 ? numerator / denominator : 0;
}

// The change of a counter; from zero when it went down (a reset).
double Delta(const QueueSnapshot& before, const QueueSnapshot& after,
             Counter c) {
  uint64_t b = before.Get(c);
  uint64_t a = after.Get(c);
  return static_cast<double>(a >= b ? a - b : a);
}

// The interval's p99 in ms from the difference of two histograms.
double IntervalP99Millis(const LatencyHistogram::Buckets& before,
                         const LatencyHistogram::Buckets& after) {
  LatencyHistogram::Buckets delta{};
  bool went_down = false;
  for (size_t b = 0; b < delta.size(); ++b) {
    if (after[b] < before[b]) went_down = true;
    delta[b] = after[b] - before[b];
  }
  const LatencyHistogram::Buckets& use = went_down ? after : delta;
  return static_cast<double>(LatencyHistogram::Percentile(use, 0.99)) / 1e6;
}

}  // namespace

std::vector<double> IostatRow(const QueueSnapshot& before,
                              const QueueSnapshot& after,
                              uint64_t interval_ns) {
  auto d = [&](Counter c) { return Delta(before, after, c); };
  double seconds = static_cast<double>(interval_ns) / 1e9;
  double reads = d(Counter::reqs_read);
  double writes = d(Counter::reqs_write);
  double ring_reqs =
      reads + writes + d(Counter::reqs_flush) + d(Counter::reqs_discard);
  double read_merges = d(Counter::merges_read);
  double write_merges = d(Counter::merges_write);
  constexpr double kSectorsPerMiB = 2048;
  constexpr double kSectorsPerKiB = 2;
  constexpr double kBytesPerMiB = 1 << 20;
  std::vector<double> row = {
      Ratio(reads, seconds),
      Ratio(writes, seconds),
      Ratio(d(Counter::sectors_read) / kSectorsPerMiB, seconds),
      Ratio(d(Counter::sectors_written) / kSectorsPerMiB, seconds),
      Ratio(read_merges, seconds),
      Ratio(write_merges, seconds),
      100 * Ratio(read_merges, read_merges + reads),
      100 * Ratio(write_merges, write_merges + writes),
      Ratio(d(Counter::sectors_read) / kSectorsPerKiB, reads),
      Ratio(d(Counter::sectors_written) / kSectorsPerKiB, writes),
      Ratio(d(Counter::read_lat_ns) / 1e6, d(Counter::reads_done)),
      Ratio(d(Counter::write_lat_ns) / 1e6, d(Counter::writes_done)),
      Ratio(d(Counter::inflight_ns), static_cast<double>(interval_ns)),
      Ratio(reads + writes, d(Counter::fuse_reads) + d(Counter::fuse_writes)),
      Ratio(d(Counter::kicks_sent), ring_reqs),
      Ratio(d(Counter::irqs_sent), ring_reqs),
      Ratio(d(Counter::ring_full), seconds),
      Ratio(d(Counter::splits), seconds),
      d(Counter::errors),
      d(Counter::invalid_reqs),
      d(Counter::refused_header_writes),
      IntervalP99Millis(before.read_latency, after.read_latency),
      IntervalP99Millis(before.write_latency, after.write_latency),
      static_cast<double>(after.Get(Counter::unsafe_bytes)) / kBytesPerMiB,
      static_cast<double>(after.Get(Counter::unsafe_bytes_max)) / kBytesPerMiB,
      Ratio(d(Counter::flushes), seconds),
      Ratio(d(Counter::full_flushes), seconds),
      Ratio(d(Counter::full_waits), seconds),
  };
  return row;
}

}  // namespace pvdisk::stats
