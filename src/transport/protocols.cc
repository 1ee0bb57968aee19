// The one place that lists the ring protocols. Adding one: a line here, and
// its own folder.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "transport/blkif/protocol.h"
#include "transport/nvme/protocol.h"
#include "transport/protocol.h"
#include "transport/virtio/protocol.h"
#include "transport/virtio_packed/protocol.h"

namespace pvdisk::transport {
namespace {

const Protocol* const* AllProtocols() {
  static const Protocol* const kAll[] = {&BlkifProtocol(), &VirtioProtocol(),
                                         &VirtioPackedProtocol(),
                                         &NvmeProtocol(), nullptr};
  return kAll;
}

}  // namespace

absl::StatusOr<const Protocol*> FindProtocol(std::string_view name) {
  for (const Protocol* const* p = AllProtocols(); *p != nullptr; ++p) {
    if ((*p)->name() == name) return *p;
  }
  std::vector<std::string> names;
  for (std::string_view n : ProtocolNames()) names.emplace_back(n);
  return absl::InvalidArgumentError(
      absl::StrCat("--frontend '", absl::string_view(name.data(), name.size()),
                   "' is not allowed: use ", absl::StrJoin(names, " or ")));
}

std::vector<std::string_view> ProtocolNames() {
  std::vector<std::string_view> names;
  for (const Protocol* const* p = AllProtocols(); *p != nullptr; ++p) {
    names.push_back((*p)->name());
  }
  return names;
}

}  // namespace pvdisk::transport
