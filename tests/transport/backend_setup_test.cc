// The setup packet of --backend process: the image files travel with it as
// descriptors, their count in the payload, and the backend takes no other
// count (a setup without an image file, or with more than one packet can
// carry, is malformed).
#include "transport/process/backend_setup.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "transport/process/wire.h"

namespace pvdisk::transport::process {
namespace {

BackendSetup SomeSetup(uint32_t image_files) {
  BackendSetup setup;
  setup.queues = 2;
  setup.backend_threads = 1;
  setup.engine_config = "uring\ndisk0.img";
  setup.fence_byte = 12345;
  setup.image_files = image_files;
  return setup;
}

// No file: an image the backend opens itself (RBD).
TEST(BackendSetupTest, ImageFilesRoundTrip) {
  for (uint32_t files : {0u, 1u, 3u, kMaxImageFiles}) {
    absl::StatusOr<BackendSetup> decoded =
        DecodeSetup(EncodeSetup(SomeSetup(files)));
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(decoded->image_files, files);
    EXPECT_EQ(decoded->fence_byte, 12345u);
    EXPECT_EQ(decoded->engine_config, "uring\ndisk0.img");
  }
}

// The backend names the disk in its log lines and writes where the
// daemon's log is.
TEST(BackendSetupTest, DiskNameAndLogTargetRoundTrip) {
  for (LogTarget target :
       {LogTarget::kStderr, LogTarget::kFile, LogTarget::kSyslog}) {
    BackendSetup setup = SomeSetup(1);
    setup.queue.disk = "disk 0.img";
    setup.log_target = target;
    absl::StatusOr<BackendSetup> decoded = DecodeSetup(EncodeSetup(setup));
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(decoded->queue.disk, "disk 0.img");
    EXPECT_EQ(decoded->log_target, target);
  }
}

TEST(BackendSetupTest, TooManyImageFilesIsMalformed) {
  absl::StatusOr<BackendSetup> decoded =
      DecodeSetup(EncodeSetup(SomeSetup(kMaxImageFiles + 1)));
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().message(), "malformed setup packet from the peer");
}

// The files besides the image (the write log) are counted on their own.
TEST(BackendSetupTest, OtherFilesRoundTripWithinTheirLimit) {
  BackendSetup setup = SomeSetup(kMaxImageFiles);
  setup.other_files = kMaxOtherFiles;
  absl::StatusOr<BackendSetup> decoded = DecodeSetup(EncodeSetup(setup));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->other_files, kMaxOtherFiles);
  EXPECT_LE(kMaxImageFiles + kMaxOtherFiles, kMaxPacketFds);
  setup.other_files = kMaxOtherFiles + 1;
  EXPECT_FALSE(DecodeSetup(EncodeSetup(setup)).ok());
}

// A control request and its answer keep their number, and an error its
// code and message.
TEST(BackendSetupTest, ControlMessagesRoundTrip) {
  absl::StatusOr<ControlMessage> ok =
      DecodeControl(EncodeControl({7, std::string("counts")}));
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->seq, 7u);
  ASSERT_TRUE(ok->body.ok());
  EXPECT_EQ(*ok->body, "counts");
  absl::StatusOr<ControlMessage> error = DecodeControl(EncodeControl(
      {8, absl::FailedPreconditionError("disk0.img lost its power already")}));
  ASSERT_TRUE(error.ok()) << error.status();
  EXPECT_EQ(error->seq, 8u);
  EXPECT_EQ(error->body.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(error->body.status().message(), "disk0.img lost its power already");
  EXPECT_FALSE(DecodeControl("short").ok());
}

// The image file sent with the setup arrives as a descriptor of the same
// inode, even after its path was given to another file (and removed).
TEST(BackendSetupTest, TheImageFileTravelsWithTheSetup) {
  char path[] = "/tmp/pvdisk_setup_test.XXXXXX";
  int image = mkstemp(path);
  ASSERT_GE(image, 0);
  struct stat sent = {};
  ASSERT_EQ(fstat(image, &sent), 0);
  ASSERT_EQ(unlink(path), 0);
  int created = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  unlink(path);
  ASSERT_GE(created, 0);
  int pair[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair), 0);
  ASSERT_TRUE(SendPacket(pair[0], EncodeSetup(SomeSetup(1)), {image}).ok());
  absl::StatusOr<Packet> packet = ReceivePacket(pair[1], 1000);
  ASSERT_TRUE(packet.ok()) << packet.status();
  absl::StatusOr<BackendSetup> setup = DecodeSetup(packet->payload);
  ASSERT_TRUE(setup.ok()) << setup.status();
  ASSERT_EQ(packet->fds.size(), setup->image_files);
  struct stat received = {};
  ASSERT_EQ(fstat(packet->fds[0], &received), 0);
  EXPECT_EQ(received.st_ino, sent.st_ino);
  EXPECT_EQ(received.st_dev, sent.st_dev);
  CloseFds(*packet);
  close(pair[0]);
  close(pair[1]);
  close(created);
  close(image);
}

}  // namespace
}  // namespace pvdisk::transport::process
