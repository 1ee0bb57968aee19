// DecodeRequest and SplitClassic on hand-built requests: what a well-formed
// request decodes to, and the error each kind of malformed one gets.
#include "fuse/protocol/request.h"

#include <cerrno>
#include <random>

#include "gtest/gtest.h"
#include "wire_builder.h"

namespace pvdisk::fuse::protocol {
namespace {

using testing::AsBytes;
using testing::BuildRequest;

int Decode(const std::vector<uint8_t>& bytes, Request* out,
           DecodeLimits limits = {}) {
  RawRequest raw;
  int split = SplitClassic(bytes, &raw);
  if (split < 0) return split;
  return DecodeRequest(raw, limits, out);
}

abi::fuse_read_in ReadIn(uint64_t offset, uint32_t size) {
  abi::fuse_read_in in{};
  in.fh = 7;
  in.offset = offset;
  in.size = size;
  return in;
}

TEST(RequestTest, ReadDecodes) {
  Request request;
  ASSERT_EQ(
      Decode(BuildRequest(abi::kRead, 42, 16, AsBytes(ReadIn(8192, 4096)), {}),
             &request),
      0);
  EXPECT_EQ(request.opcode, abi::kRead);
  EXPECT_EQ(request.unique, 42u);
  EXPECT_EQ(request.nodeid, 16u);
  EXPECT_EQ(request.fh, 7u);
  EXPECT_EQ(request.offset, 8192u);
  EXPECT_EQ(request.size, 4096u);
}

TEST(RequestTest, WriteCarriesItsData) {
  std::string data = "0123456789";
  abi::fuse_write_in in{};
  in.offset = 512;
  in.size = static_cast<uint32_t>(data.size());
  Request request;
  ASSERT_EQ(Decode(BuildRequest(abi::kWrite, 1, 16, AsBytes(in), AsBytes(data)),
                   &request),
            0);
  EXPECT_EQ(request.offset, 512u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(request.data.data()),
                        request.data.size()),
            data);
}

TEST(RequestTest, LookupNameStopsAtItsNul) {
  std::string name("disk0.img\0", 10);
  Request request;
  ASSERT_EQ(
      Decode(BuildRequest(abi::kLookup, 3, 1, {}, AsBytes(name)), &request), 0);
  EXPECT_EQ(request.name, "disk0.img");
}

TEST(RequestTest, ShortHeaderIsRefused) {
  std::vector<uint8_t> bytes(sizeof(abi::fuse_in_header) - 1, 0);
  RawRequest raw;
  EXPECT_EQ(SplitClassic(bytes, &raw), -EINVAL);
  EXPECT_EQ(raw.header, nullptr);  // nothing to answer
  EXPECT_EQ(SplitClassic({}, &raw), -EINVAL);
}

TEST(RequestTest, LengthPastTheBufferIsRefusedButAnswerable) {
  auto bytes = BuildRequest(abi::kRead, 9, 16, AsBytes(ReadIn(0, 4096)), {},
                            /*len_override=*/1000);
  RawRequest raw;
  EXPECT_EQ(SplitClassic(bytes, &raw), -EINVAL);
  ASSERT_NE(raw.header, nullptr);
  EXPECT_EQ(raw.header->unique, 9u);
  bytes = BuildRequest(abi::kRead, 9, 16, AsBytes(ReadIn(0, 4096)), {},
                       /*len_override=*/10);
  EXPECT_EQ(SplitClassic(bytes, &raw), -EINVAL);
}

TEST(RequestTest, ExtensionLengthPastTheBufferIsRefused) {
  auto bytes =
      BuildRequest(abi::kGetattr, 2, 1, AsBytes(abi::fuse_getattr_in{}), {});
  reinterpret_cast<abi::fuse_in_header*>(bytes.data())->total_extlen = 100;
  RawRequest raw;
  EXPECT_EQ(SplitClassic(bytes, &raw), -EPROTO);
  ASSERT_NE(raw.header, nullptr);
}

TEST(RequestTest, ArgumentStructCutShortIsRefused) {
  abi::fuse_read_in in = ReadIn(0, 4096);
  Request request;
  EXPECT_EQ(Decode(BuildRequest(abi::kRead, 5, 16,
                                AsBytes(in).first(sizeof(in) - 1), {}),
                   &request),
            -EINVAL);
  EXPECT_EQ(request.unique, 5u);  // still answerable
  EXPECT_EQ(Decode(BuildRequest(abi::kSetattr, 5, 16, {}, {}), &request),
            -EINVAL);
  EXPECT_EQ(Decode(BuildRequest(abi::kFallocate, 5, 16, {}, {}), &request),
            -EINVAL);
}

TEST(RequestTest, ReadOfZeroOrMoreThanMaxReadIsRefused) {
  Request request;
  DecodeLimits limits;
  limits.max_read = 1 << 20;
  EXPECT_EQ(Decode(BuildRequest(abi::kRead, 1, 16, AsBytes(ReadIn(0, 0)), {}),
                   &request, limits),
            -EINVAL);
  EXPECT_EQ(Decode(BuildRequest(abi::kRead, 1, 16,
                                AsBytes(ReadIn(0, (1 << 20) + 1)), {}),
                   &request, limits),
            -EINVAL);
  EXPECT_EQ(
      Decode(BuildRequest(abi::kRead, 1, 16, AsBytes(ReadIn(0, 1 << 20)), {}),
             &request, limits),
      0);
  EXPECT_EQ(Decode(BuildRequest(abi::kReaddir, 1, 1, AsBytes(ReadIn(0, 0)), {}),
                   &request, limits),
            -EINVAL);
}

TEST(RequestTest, ReadAtAnOffsetPastInt64IsRefused) {
  Request request;
  EXPECT_EQ(Decode(BuildRequest(abi::kRead, 1, 16,
                                AsBytes(ReadIn(~uint64_t{0} - 10, 4096)), {}),
                   &request),
            -EINVAL);
}

TEST(RequestTest, WriteWhoseSizeDisagreesWithItsDataIsRefused) {
  std::string data(100, 'x');
  abi::fuse_write_in in{};
  in.size = 200;  // more than is there
  Request request;
  EXPECT_EQ(Decode(BuildRequest(abi::kWrite, 1, 16, AsBytes(in), AsBytes(data)),
                   &request),
            -EINVAL);
  in.size = 100;
  DecodeLimits small;
  small.max_write = 64;
  EXPECT_EQ(Decode(BuildRequest(abi::kWrite, 1, 16, AsBytes(in), AsBytes(data)),
                   &request, small),
            -EINVAL);
}

TEST(RequestTest, NameWithoutNulIsRefused) {
  Request request;
  EXPECT_EQ(
      Decode(BuildRequest(abi::kLookup, 1, 1, {}, AsBytes(std::string("abc"))),
             &request),
      -EINVAL);
  EXPECT_EQ(Decode(BuildRequest(abi::kLookup, 1, 1, {}, {}), &request),
            -EINVAL);
}

TEST(RequestTest, BatchForgetCountPastTheBufferIsRefused) {
  abi::fuse_batch_forget_in in{};
  in.count = 1000;
  abi::fuse_forget_one one{16, 1};
  Request request;
  EXPECT_EQ(
      Decode(BuildRequest(abi::kBatchForget, 0, 0, AsBytes(in), AsBytes(one)),
             &request),
      -EINVAL);
  in.count = 1;
  EXPECT_EQ(
      Decode(BuildRequest(abi::kBatchForget, 0, 0, AsBytes(in), AsBytes(one)),
             &request),
      0);
  EXPECT_EQ(request.forget_count, 1u);
}

TEST(RequestTest, UnknownAndUnservedOpcodesAreNotImplemented) {
  Request request;
  EXPECT_EQ(Decode(BuildRequest(9999, 1, 1, {}, {}), &request), -ENOSYS);
  EXPECT_EQ(request.unique, 1u);
  EXPECT_EQ(Decode(BuildRequest(abi::kMkdir, 2, 1, {}, {}), &request), -ENOSYS);
  EXPECT_EQ(Decode(BuildRequest(abi::kCreate, 3, 1, {}, {}), &request),
            -ENOSYS);
}

TEST(RequestTest, OldInitWithoutFlags2Decodes) {
  abi::fuse_init_in in{};
  in.major = 7;
  in.minor = 31;
  in.flags = abi::kAsyncRead;
  Request request;
  ASSERT_EQ(Decode(BuildRequest(abi::kInit, 1, 0,
                                AsBytes(in).first(abi::kInitInCompatSize), {}),
                   &request),
            0);
  EXPECT_EQ(request.init.minor, 31u);
  EXPECT_EQ(request.init.flags2, 0u);
  EXPECT_EQ(Decode(BuildRequest(abi::kInit, 1, 0, AsBytes(in).first(8), {}),
                   &request),
            -EINVAL);
}

// Random bytes in every shape: decoding must never read out of bounds (the
// sanitizer builds would see it) and must return 0 or a negative errno.
TEST(RequestTest, RandomBytesNeverCrash) {
  std::mt19937 random(1234);
  for (int round = 0; round < 20000; ++round) {
    size_t length = random() % 200;
    std::vector<uint8_t> bytes(length);
    for (uint8_t& byte : bytes) byte = static_cast<uint8_t>(random());
    if (length >= sizeof(abi::fuse_in_header) && round % 2 == 0) {
      auto* header = reinterpret_cast<abi::fuse_in_header*>(bytes.data());
      header->len = static_cast<uint32_t>(length);
      header->opcode = 1 + random() % 53;
      header->total_extlen = static_cast<uint16_t>(random() % 4);
    }
    Request request;
    int result = Decode(bytes, &request);
    EXPECT_LE(result, 0);
  }
}

}  // namespace
}  // namespace pvdisk::fuse::protocol
