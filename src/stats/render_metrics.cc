#include "stats/render_metrics.h"

#include "absl/strings/str_cat.h"

namespace pvdisk::stats {
namespace {

// The counters node_exporter's diskstats collector has a name for, with
// that name's unit. Its io_time_seconds_total (time with at least one I/O
// in flight) has no counter here: pvdisk integrates the number in flight
// (inflight_ns, the weighted time), not the busy time.
struct NodeName {
  Counter counter;
  const char* name;
  uint64_t scale;
  bool nanoseconds_to_seconds;
};
constexpr NodeName kNodeNames[] = {
    {Counter::reads_done, "pvdisk_disk_reads_completed_total", 1, false},
    {Counter::writes_done, "pvdisk_disk_writes_completed_total", 1, false},
    {Counter::read_lat_ns, "pvdisk_disk_read_time_seconds_total", 1, true},
    {Counter::write_lat_ns, "pvdisk_disk_write_time_seconds_total", 1, true},
    {Counter::sectors_read, "pvdisk_disk_read_bytes_total", 512, false},
    {Counter::sectors_written, "pvdisk_disk_written_bytes_total", 512, false},
    {Counter::merges_read, "pvdisk_disk_reads_merged_total", 1, false},
    {Counter::merges_write, "pvdisk_disk_writes_merged_total", 1, false},
    {Counter::inflight, "pvdisk_disk_io_now", 1, false},
    {Counter::inflight_ns, "pvdisk_disk_io_time_weighted_seconds_total", 1,
     true},
};

// HELP text escapes backslash and newline; label values also the quote.
std::string Escape(std::string_view text, bool quote) {
  std::string out;
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (quote && c == '"') {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

std::string Labels(const std::string& disk, size_t queue) {
  return absl::StrCat("disk=\"", Escape(disk, true), "\",queue=\"", queue,
                      "\"");
}

std::string ValueText(const MetricName& metric, uint64_t value) {
  if (metric.nanoseconds_to_seconds) return SecondsText(value);
  return absl::StrCat(value * metric.scale);
}

void AppendHeader(std::string* out, const std::string& name,
                  std::string_view help, const char* type) {
  absl::StrAppend(out, "# HELP ", name, " ", Escape(help, false), "\n",
                  "# TYPE ", name, " ", type, "\n");
}

void AppendCounter(std::string* out, const std::vector<DiskReport>& disks,
                   size_t index) {
  const CounterInfo& info = kCounterInfo[index];
  MetricName metric = MetricFor(static_cast<Counter>(index));
  std::string help = absl::StrCat(std::string(info.meaning), " (stats field ",
                                  std::string(info.name));
  if (metric.scale == 512) absl::StrAppend(&help, ", in bytes");
  if (metric.nanoseconds_to_seconds) absl::StrAppend(&help, ", in seconds");
  absl::StrAppend(&help, ")");
  AppendHeader(out, metric.name, help, metric.counter ? "counter" : "gauge");
  for (const DiskReport& disk : disks) {
    for (size_t q = 0; q < disk.queues.size(); ++q) {
      absl::StrAppend(out, metric.name, "{", Labels(disk.name, q), "} ",
                      ValueText(metric, disk.queues[q].values[index]), "\n");
    }
  }
}

void AppendHistogram(std::string* out, const std::vector<DiskReport>& disks,
                     Direction direction) {
  const bool read = direction == Direction::kRead;
  const std::string name =
      read ? "pvdisk_read_latency_seconds" : "pvdisk_write_latency_seconds";
  AppendHeader(
      out, name,
      absl::StrCat("latency of the answered FUSE ", read ? "READs" : "WRITEs",
                   ", arrival to reply (stats field ",
                   read ? "read_latency_ns" : "write_latency_ns", ")"),
      "histogram");
  const std::vector<uint64_t> bounds = MetricBucketBounds();
  const Counter sum_counter =
      read ? Counter::read_lat_ns : Counter::write_lat_ns;
  for (const DiskReport& disk : disks) {
    for (size_t q = 0; q < disk.queues.size(); ++q) {
      const QueueSnapshot& snapshot = disk.queues[q];
      const LatencyHistogram::Buckets& buckets = snapshot.latency(direction);
      const std::string labels = Labels(disk.name, q);
      uint64_t cumulative = 0;
      int bucket = 0;
      for (uint64_t bound : bounds) {
        while (bucket < LatencyHistogram::kNumBuckets &&
               LatencyHistogram::UpperBound(bucket) <= bound) {
          cumulative += buckets[bucket++];
        }
        absl::StrAppend(out, name, "_bucket{", labels, ",le=\"",
                        SecondsText(bound), "\"} ", cumulative, "\n");
      }
      const uint64_t count = LatencyHistogram::Count(buckets);
      absl::StrAppend(out, name, "_bucket{", labels, ",le=\"+Inf\"} ", count,
                      "\n", name, "_sum{", labels, "} ",
                      SecondsText(snapshot.Get(sum_counter)), "\n", name,
                      "_count{", labels, "} ", count, "\n");
    }
  }
}

}  // namespace

MetricName MetricFor(Counter c) {
  for (const NodeName& node : kNodeNames) {
    if (node.counter == c) {
      return MetricName{node.name, node.scale, node.nanoseconds_to_seconds,
                        kCounterInfo[Index(c)].kind == CounterKind::kCount};
    }
  }
  const CounterInfo& info = kCounterInfo[Index(c)];
  const bool counter = info.kind == CounterKind::kCount;
  return MetricName{
      absl::StrCat("pvdisk_", std::string(info.name), counter ? "_total" : ""),
      1, false, counter};
}

std::vector<uint64_t> MetricBucketBounds() {
  std::vector<uint64_t> bounds;
  for (uint64_t decade = 1'000; decade <= 1'000'000'000; decade *= 10) {
    for (uint64_t step : {1, 2, 5}) {
      uint64_t target = decade * step;
      bounds.push_back(
          LatencyHistogram::UpperBound(LatencyHistogram::BucketOf(target)));
    }
  }
  bounds.push_back(
      LatencyHistogram::UpperBound(LatencyHistogram::BucketOf(10'000'000'000)));
  return bounds;
}

std::string SecondsText(uint64_t nanoseconds) {
  std::string text = absl::StrCat(nanoseconds / 1'000'000'000);
  uint64_t fraction = nanoseconds % 1'000'000'000;
  if (fraction == 0) return text;
  std::string digits = absl::StrCat(fraction + 1'000'000'000).substr(1);
  while (digits.back() == '0') digits.pop_back();
  return absl::StrCat(text, ".", digits);
}

std::string RenderMetrics(const std::vector<DiskReport>& disks) {
  std::string out;
  for (size_t i = 0; i < kNumCounters; ++i) AppendCounter(&out, disks, i);
  AppendHistogram(&out, disks, Direction::kRead);
  AppendHistogram(&out, disks, Direction::kWrite);
  return out;
}

}  // namespace pvdisk::stats
