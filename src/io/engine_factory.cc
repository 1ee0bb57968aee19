#include "io/engine_factory.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "io/failing_engine.h"
#include "io/fault_engine.h"
#include "io/hanging_engine.h"
#include "io/log_engine.h"
#include "io/null_engine.h"
#include "io/sync_engine.h"
#include "io/test_fault.h"
#include "io/uring_engine.h"
#include "io/volatile_cache_engine.h"

namespace pvdisk::io {

absl::Status CheckEngineOptions(const EngineOptions& options,
                                uint64_t size_sectors,
                                std::string_view image_name) {
  if (options.depth == 0 || options.depth > kMaxEngineDepth) {
    return absl::InvalidArgumentError(
        absl::StrCat("engine depth ", options.depth,
                     " is out of range; use 1 to ", kMaxEngineDepth));
  }
  if (options.extra_ios > kMaxEngineDepth - options.depth) {
    return absl::InvalidArgumentError(
        absl::StrCat("engine depth ", options.depth, " with ",
                     options.extra_ios, " extra I/Os for image ",
                     absl::string_view(image_name.data(), image_name.size()),
                     " is out of range; depth plus extra I/Os may be at most ",
                     kMaxEngineDepth,
                     " (use a smaller --ring-size or fewer queues per "
                     "backend thread)"));
  }
  if (options.fault) {
    const FaultRange& fault = *options.fault;
    if (fault.sector_count == 0) {
      return absl::InvalidArgumentError(
          "the EIO range must cover at least one sector");
    }
    if (fault.first_sector >= size_sectors ||
        fault.sector_count > size_sectors - fault.first_sector) {
      return absl::InvalidArgumentError(
          absl::StrCat("the EIO range ", fault.first_sector, "+",
                       fault.sector_count, " does not fit in image ",
                       absl::string_view(image_name.data(), image_name.size()),
                       " of ", size_sectors, " sectors"));
    }
  }
  if (options.delay && (options.delay->us > kMaxDelayUs ||
                        options.delay->write_us > kMaxDelayUs)) {
    return absl::InvalidArgumentError(
        absl::StrCat("a completion delay of ",
                     std::max(options.delay->us, options.delay->write_us),
                     " us is out of range; use 0 to ", kMaxDelayUs));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<IoEngine>> WrapEngine(
    std::unique_ptr<IoEngine> engine, const EngineOptions& options) {
  PVDISK_ASSIGN_OR_RETURN(TestFault test_fault, TestFaultFromEnvironment());
  // The disk's own cache, next to the medium: everything above it (faults,
  // delay) sees the disk as a device with that cache.
  if (options.volatile_cache) {
    engine = WrapWithVolatileCache(std::move(engine), options.volatile_cache);
  }
  // Test only: right over the file engine, where a format's decorator sits.
  if (test_fault.fanout) {
    engine = WrapWithTestFanout(std::move(engine),
                                options.depth + options.extra_ios);
  }
  if (options.fault) engine = WrapWithFaults(std::move(engine), *options.fault);
  // Over the fault decorator, so that its errors take the device's latency
  // too, as a remote disk's would.
  if (options.delay && (options.delay->us > 0 || options.delay->write_us > 0)) {
    engine = WrapWithDelay(std::move(engine), *options.delay, options.depth,
                           options.ring_lender);
  }
  // Over everything a disk models: the log records what the caller was
  // told, in the order it was told.
  if (options.write_log) {
    engine = WrapWithWriteLog(std::move(engine), options.write_log);
  }
  // Test only, from the environment (test_fault.h). An engine on a lent
  // ring never fails as a whole: fail= leaves it alone.
  if (test_fault.fail_at && options.ring_lender == nullptr) {
    engine = WrapWithEngineFailure(std::move(engine),
                                   ProcessFailTrigger(*test_fault.fail_at));
  }
  if (test_fault.hang_sector) {
    engine = WrapWithHang(std::move(engine), *test_fault.hang_sector);
  }
  return engine;
}

absl::StatusOr<EngineKind> ParseEngineKind(std::string_view text) {
  if (text == "uring") return EngineKind::kUring;
  if (text == "sync") return EngineKind::kSync;
  if (text == "null") return EngineKind::kNull;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown engine '", absl::string_view(text.data(), text.size()),
      "'; allowed: uring, sync, null"));
}

std::string_view EngineKindName(EngineKind kind) {
  switch (kind) {
    case EngineKind::kUring:
      return "uring";
    case EngineKind::kSync:
      return "sync";
    case EngineKind::kNull:
      return "null";
    case EngineKind::kRbd:
      return "rbd";
  }
  return "unknown";
}

absl::StatusOr<std::unique_ptr<IoEngine>> CreateFileEngine(
    const EngineOptions& options, const EngineFiles& files) {
  if (files.empty() || files.size() > kMaxEngineFiles) {
    return absl::InvalidArgumentError(
        absl::StrCat("an engine is made over 1 to ", kMaxEngineFiles,
                     " files, not ", files.size()));
  }
  std::unique_ptr<IoEngine> engine;
  switch (options.kind) {
    case EngineKind::kUring: {
      PVDISK_ASSIGN_OR_RETURN(engine, CreateUringEngine(files, options));
      break;
    }
    case EngineKind::kSync:
      engine = CreateSyncEngine(files, options);
      break;
    case EngineKind::kNull:
      engine = CreateNullEngine(files, options);
      break;
    case EngineKind::kRbd:
      return absl::InvalidArgumentError(
          absl::StrCat("the rbd engine serves rbd: disks, not the image file ",
                       files[0]->path()));
  }
  if (engine == nullptr) {
    return absl::InvalidArgumentError("unknown engine kind");
  }
  return engine;
}

absl::StatusOr<std::unique_ptr<IoEngine>> CreateEngine(
    const EngineOptions& options, const ImageFile& image) {
  PVDISK_RETURN_IF_ERROR(
      CheckEngineOptions(options, image.size_sectors(), image.path()));
  PVDISK_ASSIGN_OR_RETURN(std::unique_ptr<IoEngine> engine,
                          CreateFileEngine(options, EngineFiles{&image}));
  return WrapEngine(std::move(engine), options);
}

}  // namespace pvdisk::io
