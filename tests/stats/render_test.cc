#include "stats/render.h"

#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "stats/counters.h"
#include "stats/queue_stats.h"

namespace pvdisk::stats {
namespace {

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  // The text ends with a newline, which leaves one empty piece.
  EXPECT_FALSE(lines.empty());
  if (!lines.empty()) {
    EXPECT_EQ(lines.back(), "");
    lines.pop_back();
  }
  return lines;
}

struct Cell {
  std::string text;
  size_t begin;
  size_t end;
};

std::vector<Cell> Cells(const std::string& line) {
  std::vector<Cell> cells;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && line[i] == ' ') ++i;
    if (i == line.size()) break;
    size_t begin = i;
    while (i < line.size() && line[i] != ' ') ++i;
    cells.push_back(Cell{line.substr(begin, i - begin), begin, i});
  }
  return cells;
}

std::vector<std::string> ExpectedColumns() {
  std::vector<std::string> columns = {"disk", "queue"};
  for (const CounterInfo& info : kCounterInfo) {
    columns.emplace_back(info.name);
  }
  for (const char* name :
       {"lat_us_p50", "lat_us_p99", "read_lat_us_p50", "read_lat_us_p90",
        "read_lat_us_p99", "read_lat_us_p99.9", "write_lat_us_p50",
        "write_lat_us_p90", "write_lat_us_p99", "write_lat_us_p99.9"}) {
    columns.push_back(name);
  }
  return columns;
}

size_t Column(std::string_view name) {
  std::vector<std::string> columns = ExpectedColumns();
  for (size_t i = 0; i < columns.size(); ++i) {
    if (columns[i] == name) return i;
  }
  ADD_FAILURE() << "no column " << name;
  return 0;
}

DiskReport TwoQueueDisk() {
  QueueStats q0;
  q0.Add(Counter::reqs_read, 5);
  q0.Add(Counter::sectors_read, 40);
  q0.RaiseMax(Counter::inflight_max, 3);
  for (int i = 0; i < 10; ++i) {
    q0.RecordLatency(Direction::kRead, 10'000);  // 10 us
  }
  QueueStats q1;
  q1.Add(Counter::reqs_read, 12345678);
  q1.RaiseMax(Counter::inflight_max, 7);
  q1.Add(Counter::errors);
  q1.Add(Counter::inflight, 2);

  DiskReport disk;
  disk.name = "disk0.img";
  disk.config = {
      {"frontend", "blkif"}, {"ring_size", "256"}, {"engine", "uring"}};
  disk.queues = {q0.Snapshot(), q1.Snapshot()};
  return disk;
}

TEST(RenderTextTest, CommentHeaderRowsAndTotal) {
  std::vector<std::string> lines = Lines(RenderText({TwoQueueDisk()}));
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[0],
            "# disk disk0.img: frontend=blkif ring_size=256 engine=uring");

  std::vector<std::string> header;
  for (const Cell& cell : Cells(lines[1])) header.push_back(cell.text);
  EXPECT_EQ(header, ExpectedColumns());

  std::vector<Cell> q0 = Cells(lines[2]);
  std::vector<Cell> q1 = Cells(lines[3]);
  std::vector<Cell> total = Cells(lines[4]);
  ASSERT_EQ(q0.size(), header.size());
  ASSERT_EQ(q1.size(), header.size());
  ASSERT_EQ(total.size(), header.size());

  EXPECT_EQ(q0[0].text, "disk0.img");
  EXPECT_EQ(q0[1].text, "0");
  EXPECT_EQ(q1[1].text, "1");
  EXPECT_EQ(total[0].text, "disk0.img");
  EXPECT_EQ(total[1].text, "total");

  EXPECT_EQ(q0[Column("reqs_read")].text, "5");
  EXPECT_EQ(q0[Column("sectors_read")].text, "40");
  EXPECT_EQ(q0[Column("inflight_max")].text, "3");
  EXPECT_EQ(q0[Column("errors")].text, "0");
  EXPECT_EQ(q1[Column("reqs_read")].text, "12345678");
  EXPECT_EQ(q1[Column("errors")].text, "1");
  EXPECT_EQ(total[Column("reqs_read")].text, "12345683");
  EXPECT_EQ(total[Column("sectors_read")].text, "40");
  EXPECT_EQ(total[Column("inflight")].text, "2");
  EXPECT_EQ(total[Column("inflight_max")].text, "7");  // max, not sum
  EXPECT_EQ(total[Column("errors")].text, "1");

  // 10 us lands in a bucket less than 1% wide, rounded up to whole us.
  for (const auto* row : {&q0, &total}) {
    for (const char* column :
         {"lat_us_p50", "lat_us_p99", "read_lat_us_p50", "read_lat_us_p90",
          "read_lat_us_p99", "read_lat_us_p99.9"}) {
      EXPECT_EQ((*row)[Column(column)].text, "11") << column;
    }
    // No write was answered.
    EXPECT_EQ((*row)[Column("write_lat_us_p50")].text, "0");
    EXPECT_EQ((*row)[Column("write_lat_us_p99.9")].text, "0");
  }
  EXPECT_EQ(q1[Column("lat_us_p50")].text, "0");
  EXPECT_EQ(q1[Column("lat_us_p99")].text, "0");
}

TEST(RenderTextTest, NamesLeftAlignedNumbersRightAligned) {
  DiskReport disk = TwoQueueDisk();
  // A number wider than its column name ("segments", 8 characters).
  disk.queues[1].values[Index(Counter::segments)] = 123456789012;
  std::vector<std::string> lines = Lines(RenderText({disk}));
  ASSERT_EQ(lines.size(), 5u);
  std::vector<std::vector<Cell>> rows;
  for (size_t i = 1; i < lines.size(); ++i) {
    EXPECT_NE(lines[i].back(), ' ') << "trailing space in line " << i;
    rows.push_back(Cells(lines[i]));
  }
  for (size_t c = 0; c < rows[0].size(); ++c) {
    for (size_t r = 1; r < rows.size(); ++r) {
      ASSERT_EQ(rows[r].size(), rows[0].size());
      if (c < 2) {
        EXPECT_EQ(rows[r][c].begin, rows[0][c].begin)
            << "column " << rows[0][c].text << " row " << r;
      } else {
        EXPECT_EQ(rows[r][c].end, rows[0][c].end)
            << "column " << rows[0][c].text << " row " << r;
      }
    }
  }
  // Columns are two spaces apart; the wide number widens its column, so the
  // header name is pushed right by the difference.
  size_t c = Column("segments");
  EXPECT_EQ(rows[2][c].text, "123456789012");
  EXPECT_EQ(rows[2][c].begin, rows[2][c - 1].end + 2);
  EXPECT_EQ(rows[0][c].begin, rows[0][c - 1].end + 2 + (12 - 8));
  EXPECT_EQ(rows[0][c + 1].begin, rows[0][c].end + 2);
}

TEST(RenderTextTest, OneBlockPerDisk) {
  DiskReport a = TwoQueueDisk();
  DiskReport b;
  b.name = "other.img";
  b.config = {{"read_only", "yes"}};
  QueueStats q;
  q.Add(Counter::reqs_write, 9);
  b.queues = {q.Snapshot()};
  std::vector<std::string> lines = Lines(RenderText({a, b}));
  ASSERT_EQ(lines.size(), 5u + 4u);
  EXPECT_EQ(lines[5], "# disk other.img: read_only=yes");
  std::vector<Cell> row = Cells(lines[7]);
  std::vector<Cell> total = Cells(lines[8]);
  EXPECT_EQ(row[0].text, "other.img");
  EXPECT_EQ(row[1].text, "0");
  EXPECT_EQ(row[Column("reqs_write")].text, "9");
  EXPECT_EQ(total[1].text, "total");
  EXPECT_EQ(total[Column("reqs_write")].text, "9");
}

TEST(RenderTextTest, NoDisksIsEmpty) { EXPECT_EQ(RenderText({}), ""); }

// The counters of one row as RenderJson writes them, built independently.
std::string JsonFields(
    const std::vector<std::pair<std::string, uint64_t>>& set) {
  std::vector<std::string> fields;
  for (const std::string& name : ExpectedColumns()) {
    if (name == "disk" || name == "queue") continue;
    uint64_t value = 0;
    for (const auto& [key, v] : set) {
      if (key == name) value = v;
    }
    fields.push_back(absl::StrCat("\"", name, "\": ", value));
  }
  return absl::StrJoin(fields, ", ");
}

// JsonFields and the two histograms, here empty.
std::string JsonRow(const std::vector<std::pair<std::string, uint64_t>>& set) {
  return absl::StrCat(JsonFields(set),
                      ", \"read_latency_ns\": [], \"write_latency_ns\": []");
}

TEST(RenderJsonTest, ExactShape) {
  QueueStats q0;
  q0.Add(Counter::reqs_read, 5);
  q0.RaiseMax(Counter::inflight_max, 3);
  QueueStats q1;
  q1.Add(Counter::reqs_read, 2);
  q1.RaiseMax(Counter::inflight_max, 4);
  DiskReport disk;
  disk.name = "d0.img";
  disk.config = {{"frontend", "blkif"}, {"ring_size", "256"}};
  disk.queues = {q0.Snapshot(), q1.Snapshot()};

  std::string expected = absl::StrCat(
      "{\"daemon_pid\": 42, \"now_ns\": 3000, \"since_ns\": 1000, "
      "\"disks\": [{\"name\": \"d0.img\", \"config\": {\"frontend\": "
      "\"blkif\", \"ring_size\": 256}, \"queues\": [{\"queue\": 0, ",
      JsonRow({{"reqs_read", 5}, {"inflight_max", 3}}), "}, {\"queue\": 1, ",
      JsonRow({{"reqs_read", 2}, {"inflight_max", 4}}), "}], \"total\": {",
      JsonRow({{"reqs_read", 7}, {"inflight_max", 4}}), "}}]}\n");
  ReportClock clock;
  clock.now_ns = 3000;
  clock.since_ns = 1000;
  clock.daemon_pid = 42;
  EXPECT_EQ(RenderJson({disk}, clock), expected);
}

TEST(RenderJsonTest, NoDisks) {
  EXPECT_EQ(RenderJson({}),
            "{\"daemon_pid\": 0, \"now_ns\": 0, \"since_ns\": 0, "
            "\"disks\": []}\n");
}

TEST(RenderJsonTest, HistogramsAsUpperBoundAndCountPairs) {
  QueueStats q0;
  q0.RecordLatency(Direction::kRead, 100);  // exact bucket
  q0.RecordLatency(Direction::kRead, 100);
  q0.RecordLatency(Direction::kRead, 1000);     // [1000, 1003]
  q0.RecordLatency(Direction::kWrite, 20'000);  // [19968, 20095]
  DiskReport disk;
  disk.name = "d0.img";
  disk.queues = {q0.Snapshot()};
  std::string json = RenderJson({disk});
  std::string queue_hist =
      "\"read_latency_ns\": [[100, 2], [1003, 1]], "
      "\"write_latency_ns\": [[20095, 1]]";
  // Once in the queue, once in the total.
  size_t first = json.find(queue_hist);
  ASSERT_NE(first, std::string::npos) << json;
  EXPECT_NE(json.find(queue_hist, first + 1), std::string::npos) << json;
}

TEST(RenderJsonTest, EveryCounterKeyInEveryObject) {
  std::string json = RenderJson({TwoQueueDisk()});
  for (const std::string& name : ExpectedColumns()) {
    if (name == "disk" || name == "queue") continue;
    std::string key = absl::StrCat("\"", name, "\": ");
    size_t count = 0;
    for (size_t at = json.find(key); at != std::string::npos;
         at = json.find(key, at + 1)) {
      ++count;
    }
    EXPECT_EQ(count, 3u) << name;  // two queues and the total
  }
}

TEST(RenderJsonTest, NumbersUnquotedStringsQuoted) {
  DiskReport disk;
  disk.name = "n";
  disk.config = {{"size", "1073741824"},
                 {"engine", "uring"},
                 {"engine_mode", "buffered (O_DIRECT refused)"},
                 {"neg", "-5"},
                 {"empty", ""},
                 {"hex", "12ab"}};
  std::string json = RenderJson({disk});
  EXPECT_NE(json.find("\"size\": 1073741824,"), std::string::npos) << json;
  EXPECT_NE(json.find("\"engine\": \"uring\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"engine_mode\": \"buffered (O_DIRECT refused)\""),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"neg\": \"-5\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"empty\": \"\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"hex\": \"12ab\""), std::string::npos) << json;
}

TEST(RenderJsonTest, EscapesStrings) {
  DiskReport disk;
  disk.name = "a\"b\\c\nd\te\x01";
  disk.config = {{"k\"ey", "va\\lue"}};
  std::string json = RenderJson({disk});
  EXPECT_NE(json.find("\"name\": \"a\\\"b\\\\c\\nd\\te\\u0001\""),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"k\\\"ey\": \"va\\\\lue\""), std::string::npos) << json;
}

// Runs a Python program over `json` when python3 is available: the program
// gets the JSON file and an output file as argv[1] and argv[2]. Returns the
// output, or nullopt if Python failed (e.g. the JSON does not parse).
class PythonJson {
 public:
  PythonJson() {
    available_ = std::system("python3 -c pass >/dev/null 2>&1") == 0;
    std::string pattern =
        (std::filesystem::temp_directory_path() / "pvdisk_render.XXXXXX")
            .string();
    if (mkdtemp(pattern.data()) != nullptr) dir_ = pattern;
  }
  ~PythonJson() {
    std::error_code ignored;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
  }
  bool available() const { return available_ && !dir_.empty(); }

  std::optional<std::string> Run(const std::string& program,
                                 const std::string& json) {
    std::ofstream(dir_ + "/prog.py") << program;
    std::ofstream(dir_ + "/in.json", std::ios::binary) << json;
    std::filesystem::remove(dir_ + "/out.txt");
    std::string command = absl::StrCat("python3 ", dir_, "/prog.py ", dir_,
                                       "/in.json ", dir_, "/out.txt");
    if (std::system(command.c_str()) != 0) return std::nullopt;
    std::ifstream in(dir_ + "/out.txt", std::ios::binary);
    std::stringstream out;
    out << in.rdbuf();
    return out.str();
  }

 private:
  bool available_ = false;
  std::string dir_;
};

constexpr char kDumpProgram[] = R"(import json, sys
d = json.load(open(sys.argv[1], encoding="utf-8"))
disk = d["disks"][0]
out = [disk["name"]]
for k, v in disk["config"].items():
    out.append("%s=%s:%s" % (k, type(v).__name__, v))
out.append("queues=%d" % len(disk["queues"]))
for q in disk["queues"]:
    out.append("queue%d reqs_read=%d keys=%d" % (q["queue"], q["reqs_read"], len(q)))
out.append("total reqs_read=%d keys=%d" % (disk["total"]["reqs_read"], len(disk["total"])))
open(sys.argv[2], "w", encoding="utf-8").write("\n".join(out))
)";

TEST(RenderJsonTest, ParsesAsJson) {
  PythonJson python;
  if (!python.available()) GTEST_SKIP() << "python3 not available";
  DiskReport disk = TwoQueueDisk();
  disk.name = "we\"ird\\name";
  disk.config.push_back({"size", "1073741824"});
  std::optional<std::string> out = python.Run(kDumpProgram, RenderJson({disk}));
  ASSERT_TRUE(out.has_value()) << RenderJson({disk});
  // + 10 latency columns, + read_latency_ns and write_latency_ns
  size_t counters = kNumCounters + 10 + 2;
  EXPECT_EQ(*out, absl::StrCat("we\"ird\\name\n"
                               "frontend=str:blkif\n"
                               "ring_size=int:256\n"
                               "engine=str:uring\n"
                               "size=int:1073741824\n"
                               "queues=2\n"
                               "queue0 reqs_read=5 keys=",
                               counters + 1,
                               "\n"
                               "queue1 reqs_read=12345678 keys=",
                               counters + 1,
                               "\n"
                               "total reqs_read=12345683 keys=",
                               counters));
}

// A configuration value made of digits is written as a JSON number, but a
// JSON number may not have leading zeros, so a value such as an image path
// "0123" (or a mode "0644") makes stats.json unparseable. It must come out
// as valid JSON and keep its text.
TEST(RenderJsonTest, DigitStringWithLeadingZeroStaysValidJson) {
  PythonJson python;
  if (!python.available()) GTEST_SKIP() << "python3 not available";
  DiskReport disk;
  disk.name = "0123";
  disk.config = {{"image", "0123"}};
  std::string json = RenderJson({disk});
  std::optional<std::string> out = python.Run(kDumpProgram, json);
  ASSERT_TRUE(out.has_value()) << "stats.json does not parse: " << json;
  EXPECT_NE(out->find("image=str:0123"), std::string::npos) << *out;
}

}  // namespace
}  // namespace pvdisk::stats
