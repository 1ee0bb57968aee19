#include "image/image_headers.h"

#include <cstring>
#include <string_view>

namespace pvdisk::image {
namespace {

struct KnownHeader {
  const char* format;
  size_t offset;  // where the signature lies in the first sector
  std::string_view signature;
};

using namespace std::string_view_literals;

// Each signature is what that format's probe looks for; a probe that also
// checks a version field is matched on the signature alone (stricter).
constexpr KnownHeader kKnownHeaders[] = {
    {"qcow2", 0, "QFI\xfb"sv},  // qcow (version 1) as well
    {"vmdk", 0, "KDMV"sv},
    {"vmdk", 0, "COWD"sv},
    {"vmdk", 0, "# Disk DescriptorFile"sv},
    {"vdi", 64, "\x7f\x10\xda\xbe"sv},  // 0xbeda107f, little-endian
    {"vhdx", 0, "vhdxfile"sv},
    {"vpc", 0, "conectix"sv},
    {"qed", 0, "QED\0"sv},
    {"luks", 0, "LUKS\xba\xbe"sv},
    {"bochs", 0, "Bochs Virtual HD Image"sv},
    {"parallels", 0, "WithoutFreeSpace"sv},
    {"parallels", 0, "WithouFreSpacExt"sv},
    {"cloop", 0, "#!/bin/sh\n#V2.0 Format\nmodprobe cloop file=$0"sv},
};

}  // namespace

const char* ImageHeaderIn(std::span<const uint8_t> first_sector) {
  for (const KnownHeader& known : kKnownHeaders) {
    const size_t end = known.offset + known.signature.size();
    if (end <= first_sector.size() &&
        std::memcmp(first_sector.data() + known.offset, known.signature.data(),
                    known.signature.size()) == 0) {
      return known.format;
    }
  }
  return nullptr;
}

bool HoldsImageHeader(const uint8_t* sector) {
  return ImageHeaderIn({sector, kImageHeaderProbeBytes}) != nullptr;
}

}  // namespace pvdisk::image
