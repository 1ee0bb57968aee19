#include "transport/data_area.h"

#include <cstring>

namespace pvdisk::transport {
namespace {

constexpr uint64_t kPage = 4096;

}  // namespace

DataArea::DataArea(GrantMapper* grants, uint32_t data_pages)
    : grants_(grants), bytes_(uint64_t{data_pages} * kPage) {}

bool DataArea::CopyFrom(uint64_t addr, void* to, size_t len) {
  if (len == 0) return true;
  uint32_t first = static_cast<uint32_t>(addr / kPage);
  uint32_t last = static_cast<uint32_t>((addr + len - 1) / kPage);
  PageMapping mapping;
  if (!grants_->MapPages(first, last - first + 1, &mapping)) return false;
  std::memcpy(to, mapping.address + addr % kPage, len);
  grants_->UnmapPages(mapping);
  return true;
}

bool DataArea::CopyTo(uint64_t addr, const void* from, size_t len) {
  if (len == 0) return true;
  uint32_t first = static_cast<uint32_t>(addr / kPage);
  uint32_t last = static_cast<uint32_t>((addr + len - 1) / kPage);
  PageMapping mapping;
  if (!grants_->MapPages(first, last - first + 1, &mapping)) return false;
  std::memcpy(mapping.address + addr % kPage, from, len);
  grants_->UnmapPages(mapping);
  return true;
}

}  // namespace pvdisk::transport
