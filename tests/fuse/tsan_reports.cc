#include "tsan_reports.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "gtest/gtest.h"

namespace pvdisk::fuse_testing {
namespace {

// Where log_path=VALUE's VALUE starts and ends in TSan's option text
// (options are separated by spaces, colons or commas); npos if absent.
std::pair<size_t, size_t> LogPathValue(const std::string& options) {
  const std::string key = "log_path=";
  for (size_t at = options.find(key); at != std::string::npos;
       at = options.find(key, at + key.size())) {
    if (at == 0 || options[at - 1] == ' ' || options[at - 1] == ':' ||
        options[at - 1] == ',') {
      size_t from = at + key.size();
      size_t end = options.find_first_of(" :,", from);
      return {from, end == std::string::npos ? options.size() : end};
    }
  }
  return {std::string::npos, std::string::npos};
}

// TSAN_OPTIONS as this program was started with.
const std::string& StartOptions() {
  static const std::string options = [] {
    const char* text = std::getenv("TSAN_OPTIONS");
    return std::string(text == nullptr ? "" : text);
  }();
  return options;
}

// This program's own log_path, or "".
const std::string& OwnPrefix() {
  static const std::string prefix = [] {
    auto [from, end] = LogPathValue(StartOptions());
    return from == std::string::npos ? std::string()
                                     : StartOptions().substr(from, end - from);
  }();
  return prefix;
}

// Its children's log_path, or "".
std::string ChildPrefix() {
  if (OwnPrefix().empty()) return "";
  return OwnPrefix() + "-" + std::to_string(getpid());
}

// Report files a test has failed on already (not quoted twice).
std::set<std::string>& Quoted() {
  static std::set<std::string> quoted;
  return quoted;
}

std::string Contents(const std::string& path) {
  std::ifstream file(path);
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

// Files named BASE.* in the directory of `prefix` (DIR/BASE).
void AddFilesOf(const std::string& prefix, std::vector<std::string>* files) {
  size_t slash = prefix.rfind('/');
  const std::string dir =
      slash == std::string::npos ? "." : prefix.substr(0, slash);
  const std::string base =
      slash == std::string::npos ? prefix : prefix.substr(slash + 1);
  DIR* listing = opendir(dir.c_str());
  if (listing == nullptr) return;
  while (dirent* entry = readdir(listing)) {
    std::string name = entry->d_name;
    if (name.size() > base.size() + 1 &&
        name.compare(0, base.size(), base) == 0 && name[base.size()] == '.') {
      files->push_back(dir + "/" + name);
    }
  }
  closedir(listing);
}

// Before the first test: the children's log_path. At the end: every report
// of this program's processes that no test has quoted fails the program (a
// daemon mounted without a Mount, a backend process, this process itself).
class TsanReportCheck : public ::testing::Environment {
 public:
  void SetUp() override {
    if (OwnPrefix().empty()) return;
    auto [from, end] = LogPathValue(StartOptions());
    std::string options = StartOptions();
    options.replace(from, end - from, ChildPrefix());
    setenv("TSAN_OPTIONS", options.c_str(), 1);
  }
  void TearDown() override {
    for (const std::string& file : TsanReportFiles()) {
      if (Quoted().count(file) == 0) {
        ADD_FAILURE() << "ThreadSanitizer report in " << file << ":\n"
                      << Contents(file);
      }
    }
  }
};

[[maybe_unused]] ::testing::Environment* const kTsanReportCheck =
    ::testing::AddGlobalTestEnvironment(new TsanReportCheck);

}  // namespace

std::vector<std::string> TsanReportFiles() {
  std::vector<std::string> files;
  if (OwnPrefix().empty()) return files;
  AddFilesOf(ChildPrefix(), &files);
  const std::string own = OwnPrefix() + "." + std::to_string(getpid());
  if (std::ifstream(own)) files.push_back(own);
  std::sort(files.begin(), files.end());
  return files;
}

void ExpectNoTsanReportFrom(pid_t pid) {
  if (OwnPrefix().empty() || pid <= 0) return;
  const std::string file = ChildPrefix() + "." + std::to_string(pid);
  if (!std::ifstream(file)) return;
  Quoted().insert(file);
  ADD_FAILURE() << "ThreadSanitizer report from pvdisk process " << pid << " ("
                << file << "):\n"
                << Contents(file);
}

}  // namespace pvdisk::fuse_testing
