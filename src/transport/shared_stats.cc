#include "transport/shared_stats.h"

#include <sys/stat.h>

#include <cerrno>
#include <new>

#include "absl/strings/str_cat.h"
#include "base/errno_status.h"
#include "base/status_macros.h"

namespace pvdisk::transport {
namespace {

constexpr size_t kStatsBytes = (sizeof(stats::QueueStats) + 4095) / 4096 * 4096;

}  // namespace

absl::StatusOr<std::unique_ptr<SharedStats>> SharedStats::Create(
    const std::string& name) {
  std::unique_ptr<SharedStats> shared(new SharedStats());
  PVDISK_ASSIGN_OR_RETURN(shared->region_,
                          SharedRegion::Create(name, kStatsBytes));
  PVDISK_ASSIGN_OR_RETURN(shared->mapping_, shared->region_->Map());
  shared->stats_ = new (shared->mapping_->base()) stats::QueueStats();
  return shared;
}

absl::StatusOr<std::unique_ptr<SharedStats>> SharedStats::Attach(int fd) {
  std::unique_ptr<SharedStats> shared(new SharedStats());
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int error = errno;
    close(fd);
    return ErrnoError(error, "fstat of a stats region");
  }
  shared->region_ = SharedRegion::Adopt(fd, static_cast<size_t>(st.st_size));
  if (shared->region_->size() != kStatsBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("stats region has ", shared->region_->size(),
                     " bytes; this build expects ", kStatsBytes));
  }
  PVDISK_ASSIGN_OR_RETURN(shared->mapping_, shared->region_->Map());
  // The block was constructed by Create() in the other process.
  shared->stats_ = std::launder(
      reinterpret_cast<stats::QueueStats*>(shared->mapping_->base()));
  return shared;
}

}  // namespace pvdisk::transport
