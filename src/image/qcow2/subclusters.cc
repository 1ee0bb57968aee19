#include "image/qcow2/subclusters.h"

#include <bit>

namespace pvdisk::image::qcow2 {

const char* SubclusterFault(uint64_t raw_entry, const L2Entry& entry,
                            uint64_t raw_bitmap) {
  if (raw_entry & kL2Compressed) {
    return raw_bitmap != 0 ? "compressed cluster with a nonzero subcluster "
                             "bitmap"
                           : nullptr;
  }
  const SubclusterBitmap b = DecodeSubclusterBitmap(raw_bitmap);
  if ((b.allocated & b.zero) != 0) {
    return "subcluster both allocated and reading as zeros";
  }
  if (b.allocated != 0 && entry.host_offset == 0) {
    return "allocated subclusters without a host cluster";
  }
  return nullptr;
}

SubclusterRun SubclusterRunAt(SubclusterBitmap bitmap, uint32_t index) {
  SubclusterRun run;
  const uint32_t bit = 1u << index;
  // The mask of subclusters of the same kind, shifted so `index` is bit 0:
  // the run is its trailing ones.
  uint32_t same;
  if (bitmap.allocated & bit) {
    run.kind = L2Kind::kData;
    same = bitmap.allocated;
  } else if (bitmap.zero & bit) {
    run.kind = L2Kind::kZero;
    same = bitmap.zero;
  } else {
    run.kind = L2Kind::kUnallocated;
    same = ~(bitmap.allocated | bitmap.zero);
  }
  run.count = static_cast<uint32_t>(std::countr_one(same >> index));
  return run;
}

}  // namespace pvdisk::image::qcow2
