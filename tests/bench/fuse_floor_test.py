#!/usr/bin/env python3
"""bench/fuse_floor serving an image file (bench/compare's floor-disk; the
RBD form runs in bench.compare_rbd): what a reader of the mount sees is the
image, what it writes (and fsyncs) lands in the image, fio's crc32c
verification passes through it, and bad arguments are refused with one
line, status 2 and nothing mounted. The delay model's floor (bench/delay's
floor configs): with engine=null and delay=, reads are zeros and none
completes before the delay; max-inflight=N holds the engines to N at once;
spin=held with the uring engine and a delay still verifies. Needs FUSE
over io_uring (else skipped)."""
import json
import mmap
import os
import subprocess
import unittest

import benchtest
from pvbench import lab

SIZE = 16 << 20


def floor_program():
    return os.path.join(benchtest.build_dir(), "bench", "targets", "fuse_floor")


class FloorDiskTest(unittest.TestCase):
    def setUp(self):
        self.scratch = benchtest.Scratch()
        self.image = os.path.join(self.scratch.dir, "img")
        with open(self.image, "wb") as f:
            f.write(os.urandom(SIZE))
        self.mnt = os.path.join(self.scratch.dir, "mnt")
        os.makedirs(self.mnt)
        self.floor = None

    def tearDown(self):
        if self.floor is not None:
            self.floor.close()
        self.scratch.close()

    def start(self, options="", words=()):
        """bench/compare's floor-disk target on the image (with `options`
        after its path, fuse_floor's `words` after it), mounted."""
        self.floor = lab.FuseFloor(floor_program(), self.mnt, SIZE, "uring",
                                   self.image + options, words)

    def fio(self, *args):
        """fio's JSON on the mount, 4 KiB direct io_uring reads unless
        `args` say otherwise."""
        p = subprocess.run(
            ["fio", "--name=j", "--filename=" + self.floor.file,
             "--ioengine=io_uring", "--direct=1", "--rw=randread",
             "--bs=4k", "--output-format=json"] + list(args),
            capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        return json.loads(p.stdout)["jobs"][0]["read"]

    def stop(self):
        """Unmounting ends the server with status 0."""
        self.floor.close()
        self.assertEqual(self.floor.process.returncode, 0)
        self.floor = None
        self.assertEqual(lab.mounted_under(self.scratch.dir), [])

    @staticmethod
    def read_direct(path, offset, length):
        """`length` bytes at `offset`, read with O_DIRECT into an aligned
        buffer."""
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
        try:
            buf = mmap.mmap(-1, length)  # page-aligned, as O_DIRECT wants
            done = os.preadv(fd, [buf], offset)
            return bytes(buf[:done])
        finally:
            os.close(fd)

    def test_reads_are_the_image(self):
        self.start()
        disk = self.floor.file
        with open(self.image, "rb") as f:
            want = f.read()
        for offset, length in ((0, 4096), (5 << 20, 1 << 20), (SIZE - 8192, 8192)):
            self.assertEqual(self.read_direct(disk, offset, length),
                             want[offset:offset + length], (offset, length))
        self.stop()

    def test_writes_reach_the_image(self):
        self.start()
        data = os.urandom(1 << 20)
        buf = mmap.mmap(-1, len(data))
        buf[:] = data
        fd = os.open(self.floor.file, os.O_WRONLY | os.O_DIRECT)
        try:
            self.assertEqual(os.pwritev(fd, [buf], 3 << 20), len(data))
            os.fsync(fd)  # FUSE FSYNC: the engine's flush
        finally:
            os.close(fd)
        self.stop()
        with open(self.image, "rb") as f:
            f.seek(3 << 20)
            self.assertEqual(f.read(len(data)), data)

    def test_fio_verifies(self):
        self.start()
        p = subprocess.run(
            ["fio", "--name=v", "--filename=" + self.floor.file,
             "--ioengine=io_uring", "--direct=1", "--rw=randwrite",
             "--bsrange=4k-256k", "--iodepth=16", "--size=%d" % SIZE,
             "--verify=crc32c", "--do_verify=1", "--verify_fatal=1"],
            capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertNotIn("verify", p.stderr.lower())
        self.stop()

    def test_null_engine_with_a_delay(self):
        # The delay model's floor: no I/O (zeros, not the image), and no
        # read comes back before its delay, alone or 8 at once.
        self.start(",delay=3000", ["engine=null"])
        self.assertEqual(self.read_direct(self.floor.file, 1 << 20, 8192),
                         bytes(8192))
        for depth in (1, 8):
            read = self.fio("--iodepth=%d" % depth, "--time_based",
                            "--runtime=500ms")
            self.assertGreater(read["total_ios"], 0)
            # Each read from its submission (fio's lat: clat starts only
            # once io_uring_enter returned, which may be after the server
            # took the request), and the mean as bench/delay judges it.
            self.assertGreaterEqual(read["lat_ns"]["min"], 3_000_000, depth)
            self.assertGreaterEqual(read["clat_ns"]["mean"], 3_000_000, depth)
        self.stop()

    def test_max_inflight_caps_all_queue_threads(self):
        # Two at once with the engines, each held 10 ms: at most 200 reads
        # a second however deep fio goes (a bound the cap sets, not a speed:
        # a slow machine only reads fewer).
        self.start(",delay=10000", ["engine=null", "max-inflight=2"])
        read = self.fio("--iodepth=16", "--time_based", "--runtime=1",
                        "--numjobs=2", "--group_reporting")
        self.assertGreater(read["total_ios"], 0)
        self.assertLessEqual(read["iops"], 200 * 1.05, read["iops"])
        self.stop()

    def test_spin_while_held_with_a_delay_verifies(self):
        # The uring engine under the delay, its queue threads spinning while
        # it holds I/O: what fio wrote it reads back.
        self.start(",delay=500", ["spin=held"])
        p = subprocess.run(
            ["fio", "--name=v", "--filename=" + self.floor.file,
             "--ioengine=io_uring", "--direct=1", "--rw=randwrite",
             "--bsrange=4k-128k", "--iodepth=8", "--size=%d" % (4 << 20),
             "--verify=crc32c", "--do_verify=1", "--verify_fatal=1"],
            capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.stop()

    def test_bad_arguments_are_refused(self):
        short = os.path.join(self.scratch.dir, "short")
        with open(short, "wb") as f:
            f.write(b"\0" * 4096)
        cases = [
            ([self.mnt, str(SIZE), "classic", "32", self.image],
             "an IMAGE needs the uring channel"),
            ([self.mnt, str(SIZE), "uring", "32", short],
             "4096 bytes, less than SIZE_BYTES (%d)" % SIZE),
            ([self.mnt, str(SIZE), "uring", "32",
              os.path.join(self.scratch.dir, "missing")], "does not exist"),
            ([self.mnt, str(SIZE), "uring", "32", self.image + ",eio=0"],
             "with no other option than delay=US"),
            ([self.mnt, str(SIZE), "uring", "32", self.image, "engine=sync"],
             "'engine=sync' is not an option of IMAGE; allowed: "
             "engine=uring|null, max-inflight=N (N from 1 up), spin=held"),
            ([self.mnt, str(SIZE), "uring", "32", self.image,
              "max-inflight=0"], "'max-inflight=0' is not an option"),
            ([self.mnt, str(SIZE), "uring", "32", "rbd:rbd/x", "engine=null"],
             "engine=null serves an image file, not rbd:POOL/IMAGE"),
        ]
        for args, message in cases:
            p = subprocess.run([floor_program()] + args, capture_output=True,
                               text=True, timeout=30)
            self.assertEqual(p.returncode, 2, (args, p.stderr))
            self.assertIn(message, p.stderr)
            self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
            self.assertEqual(lab.mounted_under(self.scratch.dir), [])


def uring_offered():
    """FUSE over io_uring here (the module parameter, which fuse_floor turns
    on as root)."""
    path = "/sys/module/fuse/parameters/enable_uring"
    if not os.path.exists(path):
        return False
    with open(path) as f:
        return os.geteuid() == 0 or f.read().strip() in ("Y", "1")


if __name__ == "__main__":
    benchtest.need("fio", "fusermount3")
    if not os.access(floor_program(), os.X_OK):
        print("SKIP: %s not built" % floor_program())
        raise SystemExit(benchtest.SKIP)
    if not uring_offered():
        print("SKIP: this kernel does not offer FUSE over io_uring")
        raise SystemExit(benchtest.SKIP)
    benchtest.main()
