#include "stats/stats_document.h"

#include "absl/strings/str_cat.h"
#include "stats/json_reader.h"

namespace pvdisk::stats {
namespace {

uint64_t UnsignedOr0(const JsonValue* value) {
  return value != nullptr && value->is_unsigned ? value->unsigned_value : 0;
}

// [[upper bound, count], ...] into buckets; each upper bound names its bucket.
void ReadHistogram(const JsonValue* pairs, LatencyHistogram::Buckets* out) {
  if (pairs == nullptr) return;
  for (const JsonValue& pair : pairs->array) {
    if (pair.array.size() != 2) continue;
    int bucket = LatencyHistogram::BucketOf(UnsignedOr0(&pair.array[0]));
    (*out)[bucket] += UnsignedOr0(&pair.array[1]);
  }
}

QueueSnapshot ReadRow(const JsonValue& row) {
  QueueSnapshot snapshot;
  for (size_t i = 0; i < kNumCounters; ++i) {
    snapshot.values[i] = UnsignedOr0(row.Find(kCounterInfo[i].name));
  }
  ReadHistogram(row.Find("read_latency_ns"), &snapshot.read_latency);
  ReadHistogram(row.Find("write_latency_ns"), &snapshot.write_latency);
  return snapshot;
}

}  // namespace

absl::StatusOr<StatsDocument> ParseStatsDocument(std::string_view text) {
  std::string error;
  std::optional<JsonValue> root = ParseJson(text, &error);
  if (!root.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("stats.json is not JSON: ", error));
  }
  const JsonValue* disks = root->Find("disks");
  if (disks == nullptr || disks->type != JsonValue::Type::kArray) {
    return absl::InvalidArgumentError("stats.json has no \"disks\" array");
  }
  StatsDocument document;
  document.daemon_pid =
      static_cast<int64_t>(UnsignedOr0(root->Find("daemon_pid")));
  document.now_ns = UnsignedOr0(root->Find("now_ns"));
  document.since_ns = UnsignedOr0(root->Find("since_ns"));
  for (const JsonValue& disk : disks->array) {
    DiskDocument out;
    if (const JsonValue* name = disk.Find("name")) out.name = name->string;
    if (const JsonValue* config = disk.Find("config")) {
      for (const auto& [key, value] : config->object) {
        out.config[key] = value.type == JsonValue::Type::kString
                              ? value.string
                              : absl::StrCat(value.unsigned_value);
      }
    }
    if (const JsonValue* queues = disk.Find("queues")) {
      for (const JsonValue& queue : queues->array) {
        out.queues.push_back(ReadRow(queue));
      }
    }
    if (const JsonValue* total = disk.Find("total")) {
      out.total = ReadRow(*total);
    }
    document.disks.push_back(std::move(out));
  }
  return document;
}

}  // namespace pvdisk::stats
