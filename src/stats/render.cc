#include "stats/render.h"

#include <algorithm>
#include <cctype>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pvdisk::stats {
namespace {

// Latency columns come after the counters; they are derived from the
// histogram, in whole microseconds (rounded up so a non-zero latency never
// shows as 0).
constexpr std::string_view kLatencyColumns[] = {"lat_us_p50", "lat_us_p99"};

uint64_t PercentileMicros(const LatencyHistogram::Buckets& buckets,
                          double fraction) {
  uint64_t ns = LatencyHistogram::Percentile(buckets, fraction);
  return (ns + 999) / 1000;
}

// The values of one row, in column order.
std::vector<uint64_t> RowValues(const QueueSnapshot& snapshot) {
  std::vector<uint64_t> row(snapshot.values.begin(), snapshot.values.end());
  row.push_back(PercentileMicros(snapshot.latency, 0.50));
  row.push_back(PercentileMicros(snapshot.latency, 0.99));
  return row;
}

std::vector<std::string_view> ColumnNames() {
  std::vector<std::string_view> names;
  for (const CounterInfo& info : kCounterInfo) names.push_back(info.name);
  for (std::string_view name : kLatencyColumns) names.push_back(name);
  return names;
}

// A canonical JSON number: digits, no leading zero (so "0123" stays a
// string and the output always parses).
bool IsWholeNumber(std::string_view text) {
  if (text.empty() || (text.size() > 1 && text[0] == '0')) return false;
  return std::all_of(text.begin(), text.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c));
  });
}

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

std::string JsonCounters(const QueueSnapshot& snapshot) {
  std::vector<std::string_view> names = ColumnNames();
  std::vector<uint64_t> values = RowValues(snapshot);
  std::vector<std::string> fields;
  for (size_t i = 0; i < names.size(); ++i) {
    fields.push_back(absl::StrCat(JsonString(names[i]), ": ", values[i]));
  }
  return absl::StrJoin(fields, ", ");
}

}  // namespace

std::string RenderText(const std::vector<DiskReport>& disks) {
  std::vector<std::string_view> names = ColumnNames();
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
    for (std::string_view name : names) header.emplace_back(name);
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

    std::vector<size_t> widths(header.size(), 0);
    for (const auto& row : rows) {
      for (size_t c = 0; c < row.size(); ++c) {
        widths[c] = std::max(widths[c], row[c].size());
      }
    }
    for (const auto& row : rows) {
      std::string line;
      for (size_t c = 0; c < row.size(); ++c) {
        if (c > 0) line += "  ";
        // Names left-aligned, numbers right-aligned.
        size_t pad = widths[c] - row[c].size();
        if (c < 2) {
          line += row[c] + std::string(pad, ' ');
        } else {
          line += std::string(pad, ' ') + row[c];
        }
      }
      while (!line.empty() && line.back() == ' ') line.pop_back();
      absl::StrAppend(&out, line, "\n");
    }
  }
  return out;
}

std::string RenderJson(const std::vector<DiskReport>& disks) {
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
  return absl::StrCat("{\"disks\": [", absl::StrJoin(disk_json, ", "), "]}\n");
}

}  // namespace pvdisk::stats
