// Fuzzes ParseDiskArg
// (--disk PATH[,ro][,lock=off][,format=raw|qcow2][,size=SIZE]
// [,eio=SECTOR[+COUNT]][,delay=US][,delay-write=US], or
// rbd:POOL/IMAGE[,conf=][,id=][,timeout=] with the same options but lock=
// and format=):
// any text is either refused with an InvalidArgument that starts with
// "--disk", or gives a spec with a non-empty path without commas, a positive
// size and a non-empty fault range; that spec, written back in the canonical
// form, parses to the same spec.
#include <cstdint>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "cli/disk_arg.h"
#include "fuzz_input.h"

namespace {

std::string Canonical(const pvdisk::fuse::DiskSpec& spec) {
  std::string text = spec.path;
  if (spec.read_only) absl::StrAppend(&text, ",ro");
  // An rbd: disk takes no lock= (its image has its own lock).
  if (!spec.lock && !spec.rbd) absl::StrAppend(&text, ",lock=off");
  if (spec.format != pvdisk::image::ImageFormat::kProbe) {
    absl::StrAppend(&text,
                    ",format=", pvdisk::image::ImageFormatName(spec.format));
  }
  if (spec.rbd) {
    if (!spec.rbd->conf.empty())
      absl::StrAppend(&text, ",conf=", spec.rbd->conf);
    if (!spec.rbd->id.empty()) absl::StrAppend(&text, ",id=", spec.rbd->id);
    absl::StrAppend(&text, ",timeout=", spec.rbd->timeout_seconds);
  }
  if (spec.delay) {
    absl::StrAppend(&text, ",delay=", spec.delay->us,
                    ",delay-write=", spec.delay->write_us);
  }
  if (spec.expected_size) absl::StrAppend(&text, ",size=", *spec.expected_size);
  if (spec.fault) {
    absl::StrAppend(&text, ",eio=", spec.fault->first_sector, "+",
                    spec.fault->sector_count);
  }
  return text;
}

bool SameSpec(const pvdisk::fuse::DiskSpec& a,
              const pvdisk::fuse::DiskSpec& b) {
  const bool same_rbd =
      a.rbd.has_value() == b.rbd.has_value() &&
      (!a.rbd || (a.rbd->pool == b.rbd->pool && a.rbd->image == b.rbd->image &&
                  a.rbd->conf == b.rbd->conf && a.rbd->id == b.rbd->id &&
                  a.rbd->timeout_seconds == b.rbd->timeout_seconds));
  const bool same_delay =
      a.delay.has_value() == b.delay.has_value() &&
      (!a.delay ||
       (a.delay->us == b.delay->us && a.delay->write_us == b.delay->write_us));
  return same_rbd && same_delay && a.path == b.path &&
         a.read_only == b.read_only && a.lock == b.lock &&
         a.format == b.format && a.expected_size == b.expected_size &&
         a.fault.has_value() == b.fault.has_value() &&
         (!a.fault || (a.fault->first_sector == b.fault->first_sector &&
                       a.fault->sector_count == b.fault->sector_count));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<pvdisk::fuse::DiskSpec> spec = pvdisk::cli::ParseDiskArg(text);
  if (!spec.ok()) {
    FUZZ_CHECK(spec.status().code() == absl::StatusCode::kInvalidArgument,
               "refused with a code other than InvalidArgument");
    FUZZ_CHECK(absl::StartsWith(spec.status().message(), "--disk"),
               "the refusal does not name --disk");
    return 0;
  }
  FUZZ_CHECK(!spec->path.empty(), "an empty image path accepted");
  FUZZ_CHECK(!absl::StrContains(spec->path, ','),
             "a path with an option separator accepted");
  FUZZ_CHECK(!spec->expected_size || *spec->expected_size > 0,
             "a zero size accepted");
  FUZZ_CHECK(!spec->fault || spec->fault->sector_count > 0,
             "an empty fault range accepted");
  absl::StatusOr<pvdisk::fuse::DiskSpec> again =
      pvdisk::cli::ParseDiskArg(Canonical(*spec));
  FUZZ_CHECK(again.ok() && SameSpec(*spec, *again),
             "the canonical form does not parse back to the same spec");
  return 0;
}
