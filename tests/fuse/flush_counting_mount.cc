#include "flush_counting_mount.h"

#include <chrono>

namespace pvdisk::fuse_testing {

FlushCountingMount::FlushCountingMount(const std::string& backing_dir,
                                       std::string mountpoint)
    : mountpoint_(std::move(mountpoint)) {
  process_ = std::make_unique<BackgroundProcess>(std::vector<std::string>{
      FLUSH_COUNTING_FS_BINARY, backing_dir, mountpoint_});
  if (!process_->started()) return;
  // Mounted, or the file system gave up (then Wait() collects its output).
  ok_ = WaitUntil(
            [&] {
              return IsMounted(mountpoint_) ||
                     process_->Wait(std::chrono::milliseconds(0));
            },
            std::chrono::seconds(20)) &&
        IsMounted(mountpoint_);
}

FlushCountingMount::~FlushCountingMount() {
  if (IsMounted(mountpoint_)) {
    // A process that used an image here may still hold it for a moment
    // after it exited (an io_uring instance is torn down asynchronously,
    // and with it the files it had registered): busy until then.
    CommandResult result;
    const bool unmounted = WaitUntil(
        [&] {
          result = RunCommand({"fusermount3", "-u", mountpoint_});
          return result.exit_code == 0;
        },
        std::chrono::seconds(10));
    if (!unmounted) {
      ADD_FAILURE() << "fusermount3 -u " << mountpoint_ << ": "
                    << result.Describe();
      RunCommand({"fusermount3", "-u", "-z", mountpoint_});
    }
  }
  if (process_ && process_->started() &&
      !process_->Wait(std::chrono::seconds(20))) {
    ADD_FAILURE() << "flush_counting_fs did not exit after its unmount";
  }
  // ~BackgroundProcess kills it if it still runs.
}

std::string FlushCountingMount::Describe() const {
  if (!process_ || !process_->started()) return "flush_counting_fs not started";
  return process_->result().Describe();
}

FileTally FlushCountingMount::CountsOf(const std::string& name) const {
  return flush_counting_fs::ParseTally(ReadWholeFile(Path(".flush_counts")),
                                       "/" + name);
}

}  // namespace pvdisk::fuse_testing
