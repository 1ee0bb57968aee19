// IovCursor: skipping transferred bytes across iovec boundaries.
#include "io/iov_cursor.h"

#include <sys/uio.h>

#include "gtest/gtest.h"

namespace pvdisk::io {
namespace {

TEST(IovCursorTest, SkipsWholeAndPartialIovecs) {
  char a[10], b[20], c[30];
  const iovec iov[] = {{a, sizeof(a)}, {b, sizeof(b)}, {c, sizeof(c)}};
  IovCursor cursor;

  cursor.Reset(iov, 3, 0);
  ASSERT_EQ(cursor.count(), 3);
  EXPECT_EQ(cursor.data()[0].iov_base, a);

  cursor.Reset(iov, 3, 10);  // exactly the first one
  ASSERT_EQ(cursor.count(), 2);
  EXPECT_EQ(cursor.data()[0].iov_base, b);
  EXPECT_EQ(cursor.data()[0].iov_len, 20u);

  cursor.Reset(iov, 3, 15);  // into the second one
  ASSERT_EQ(cursor.count(), 2);
  EXPECT_EQ(cursor.data()[0].iov_base, b + 5);
  EXPECT_EQ(cursor.data()[0].iov_len, 15u);
  EXPECT_EQ(cursor.data()[1].iov_base, c);

  cursor.Reset(iov, 3, 59);  // one byte left
  ASSERT_EQ(cursor.count(), 1);
  EXPECT_EQ(cursor.data()[0].iov_base, c + 29);
  EXPECT_EQ(cursor.data()[0].iov_len, 1u);

  // The caller's array is never modified.
  EXPECT_EQ(iov[1].iov_base, b);
  EXPECT_EQ(iov[1].iov_len, 20u);
}

}  // namespace
}  // namespace pvdisk::io
