#include "stats/render.h"

#include <algorithm>
#include <cctype>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "stats/text_table.h"

namespace pvdisk::stats {
namespace {

// The percentiles shown per direction, and their column suffixes.
constexpr double kDirectionPercentiles[] = {0.50, 0.90, 0.99, 0.999};
constexpr const char* kPercentileNames[] = {"p50", "p90", "p99", "p99.9"};

uint64_t PercentileMicros(const LatencyHistogram::Buckets& buckets,
                          double fraction) {
  uint64_t ns = LatencyHistogram::Percentile(buckets, fraction);
  return (ns + 999) / 1000;
}

// The values of one row, in column order.
std::vector<uint64_t> RowValues(const QueueSnapshot& snapshot) {
  std::vector<uint64_t> row(snapshot.values.begin(), snapshot.values.end());
  LatencyHistogram::Buckets all = snapshot.AllLatency();
  row.push_back(PercentileMicros(all, 0.50));
  row.push_back(PercentileMicros(all, 0.99));
  for (Direction d : {Direction::kRead, Direction::kWrite}) {
    for (double fraction : kDirectionPercentiles) {
      row.push_back(PercentileMicros(snapshot.latency(d), fraction));
    }
  }
  return row;
}

std::vector<std::string> ColumnNames() {
  std::vector<std::string> names;
  for (const CounterInfo& info : kCounterInfo) names.emplace_back(info.name);
  for (std::string& name : LatencyColumnNames()) names.push_back(name);
  return names;
}

std::string JsonHistogram(const LatencyHistogram::Buckets& buckets) {
  std::vector<std::string> pairs;
  for (int b = 0; b < LatencyHistogram::kNumBuckets; ++b) {
    if (buckets[b] == 0) continue;
    pairs.push_back(absl::StrCat("[", LatencyHistogram::UpperBound(b), ", ",
                                 buckets[b], "]"));
  }
  return absl::StrCat("[", absl::StrJoin(pairs, ", "), "]");
}

// A canonical JSON number: digits, no leading zero (so "0123" stays a
// string and the output always parses).
bool IsWholeNumber(std::string_view text) {
  if (text.empty() || (text.size() > 1 && text[0] == '0')) return false;
  return std::all_of(text.begin(), text.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c));
  });
}

// The counters, the latency columns and the histograms of one row.
std::string JsonCounters(const QueueSnapshot& snapshot) {
  std::vector<std::string> names = ColumnNames();
  std::vector<uint64_t> values = RowValues(snapshot);
  std::vector<std::string> fields;
  for (size_t i = 0; i < names.size(); ++i) {
    fields.push_back(absl::StrCat(JsonString(names[i]), ": ", values[i]));
  }
  fields.push_back(absl::StrCat("\"read_latency_ns\": ",
                                JsonHistogram(snapshot.read_latency)));
  fields.push_back(absl::StrCat("\"write_latency_ns\": ",
                                JsonHistogram(snapshot.write_latency)));
  return absl::StrJoin(fields, ", ");
}

}  // namespace

std::string JsonString(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          absl::StrAppend(&out, "\\u00", absl::Hex(c, absl::kZeroPad2));
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

std::vector<std::string> LatencyColumnNames() {
  std::vector<std::string> names = {"lat_us_p50", "lat_us_p99"};
  for (const char* direction : {"read", "write"}) {
    for (const char* percentile : kPercentileNames) {
      names.push_back(absl::StrCat(direction, "_lat_us_", percentile));
    }
  }
  return names;
}

std::string RenderText(const std::vector<DiskReport>& disks) {
  std::vector<std::string> names = ColumnNames();
  std::string out;
  for (const DiskReport& disk : disks) {
    std::vector<std::string> config;
    for (const auto& [key, value] : disk.config) {
      config.push_back(absl::StrCat(key, "=", value));
    }
    absl::StrAppend(&out, "# disk ", disk.name, ": ",
                    absl::StrJoin(config, " "), "\n");

    // Rows as text first, so every column can be as wide as its widest cell.
    std::vector<std::vector<std::string>> rows;
    std::vector<std::string> header = {"disk", "queue"};
    for (const std::string& name : names) header.push_back(name);
    rows.push_back(header);
    auto add_row = [&](std::string queue, const QueueSnapshot& snapshot) {
      std::vector<std::string> row = {disk.name, std::move(queue)};
      for (uint64_t v : RowValues(snapshot)) row.push_back(absl::StrCat(v));
      rows.push_back(std::move(row));
    };
    for (size_t q = 0; q < disk.queues.size(); ++q) {
      add_row(absl::StrCat(q), disk.queues[q]);
    }
    add_row("total", Total(disk.queues.data(), disk.queues.size()));

    // Names (disk, queue) left-aligned, numbers right-aligned.
    absl::StrAppend(&out, AlignColumns(rows, 2, "  "));
  }
  return out;
}

std::string RenderJson(const std::vector<DiskReport>& disks,
                       const ReportClock& clock) {
  std::vector<std::string> disk_json;
  for (const DiskReport& disk : disks) {
    std::vector<std::string> config;
    for (const auto& [key, value] : disk.config) {
      config.push_back(
          absl::StrCat(JsonString(key), ": ",
                       IsWholeNumber(value) ? value : JsonString(value)));
    }
    std::vector<std::string> queues;
    for (size_t q = 0; q < disk.queues.size(); ++q) {
      queues.push_back(absl::StrCat("{\"queue\": ", q, ", ",
                                    JsonCounters(disk.queues[q]), "}"));
    }
    QueueSnapshot total = Total(disk.queues.data(), disk.queues.size());
    disk_json.push_back(
        absl::StrCat("{\"name\": ", JsonString(disk.name), ", \"config\": {",
                     absl::StrJoin(config, ", "), "}, \"queues\": [",
                     absl::StrJoin(queues, ", "), "], \"total\": {",
                     JsonCounters(total), "}}"));
  }
  return absl::StrCat("{\"daemon_pid\": ", clock.daemon_pid,
                      ", \"now_ns\": ", clock.now_ns,
                      ", \"since_ns\": ", clock.since_ns, ", \"disks\": [",
                      absl::StrJoin(disk_json, ", "), "]}\n");
}

}  // namespace pvdisk::stats
