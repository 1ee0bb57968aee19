#!/usr/bin/env python3
"""bench/spans: the pairing of trace events into spans on a hand-made
excerpt of perf script output, then the tool end to end on a real mount
under a real perf trace (root, perf and the fuse tracepoints needed: else
skipped), whose spans must nest as the layers do and leave nothing
mounted."""
import glob
import json
import os
import shutil
import sys
import unittest

import benchtest
from pvbench import spans

# One 4 KiB read through pvdisk, as perf script prints it: fio submits it,
# the kernel sends the FUSE request and posts it into pvdisk's entry 0x7e,
# pvdisk reads the image and commits. Not image I/O: the wake tag's eventfd
# read, and an eventfd read under a lent tag (completes with 8 bytes); not
# an entry: a lent tag's completion with 0 (an fsync, say). Padded with a
# request at each end for the margins (and a commit of another entry, by
# which the parser learns whose ring 0xb is).
EXCERPT = """\
fio  10 [000]  100.000000: io_uring:io_uring_submit_req: ring 0xa, req 0x1, user_data 0x55, opcode READ, flags 0x0, sq_thread 0
pvdisk-fuse-q0  20 [001]  100.000001: io_uring:io_uring_submit_req: ring 0xb, req 0x9, user_data 0x7d, opcode URING_CMD, flags 0x0, sq_thread 0
fio  10 [000]  101.000000: fuse:fuse_request_send: connection 40 req 7 opcode 15 (FUSE_READ) len 80
fio  10 [000]  101.000002: io_uring:io_uring_submit_req: ring 0xa, req 0x2, user_data 0x56, opcode READ, flags 0x0, sq_thread 0
pvdisk-fuse-q0  20 [001]  101.000010: io_uring:io_uring_complete: ring 0xb, req 0x3, user_data 0x7e, result 0, cflags 0x0 extra1 0 extra2 0
pvdisk-fuse-q0  20 [001]  101.000020: io_uring:io_uring_submit_req: ring 0xb, req 0x4, user_data 0x20000000001, opcode READ, flags 0x0, sq_thread 0
pvdisk-fuse-q0  20 [001]  101.000021: io_uring:io_uring_submit_req: ring 0xb, req 0x5, user_data 0x100000000, opcode READ, flags 0x0, sq_thread 0
pvdisk-fuse-q0  20 [001]  101.000022: io_uring:io_uring_submit_req: ring 0xb, req 0x7, user_data 0x20000000009, opcode READ, flags 0x0, sq_thread 0
pvdisk-fuse-q0  20 [001]  101.000023: io_uring:io_uring_complete: ring 0xb, req 0x8, user_data 0x30000000001, result 0, cflags 0x0 extra1 0 extra2 0
pvdisk-fuse-q0  20 [001]  101.000300: io_uring:io_uring_complete: ring 0xb, req 0x7, user_data 0x20000000009, result 8, cflags 0x0 extra1 0 extra2 0
pvdisk-fuse-q0  20 [001]  101.000320: io_uring:io_uring_complete: ring 0xb, req 0x4, user_data 0x20000000001, result 4096, cflags 0x0 extra1 0 extra2 0
pvdisk-fuse-q0  20 [001]  101.000330: io_uring:io_uring_submit_req: ring 0xb, req 0x6, user_data 0x7e, opcode URING_CMD, flags 0x0, sq_thread 0
pvdisk-fuse-q0  20 [001]  101.000332: fuse:fuse_request_end: connection 40 req 7 len 4112 error 0
fio  10 [000]  101.000350: io_uring:io_uring_complete: ring 0xa, req 0x2, user_data 0x56, result 4096, cflags 0x0 extra1 0 extra2 0
fio  10 [000]  102.000000: io_uring:io_uring_complete: ring 0xa, req 0x1, user_data 0x55, result 4096, cflags 0x0 extra1 0 extra2 0
""".splitlines()


class ParseTest(unittest.TestCase):
    def test_pairs_each_layer_of_one_request(self):
        found = spans.parse(EXCERPT, margin_s=0.5)
        us = {k: [round(v * 1e6) for v in values] for k, values in found.items()}
        # Only the middle request counts (the first starts in the margin).
        self.assertEqual(us["fio"], [348])
        self.assertEqual(us["fuse"], [332])
        self.assertEqual(us["held"], [320])
        self.assertEqual(us["image"], [300])

    def test_counts_the_image_ios_in_flight_over_time(self):
        in_flight = {}
        spans.parse(EXCERPT, margin_s=0.5, in_flight=in_flight)
        # Steady state 100.5 .. 101.5: the one image read is open 300 us
        # (the eventfd read beside it is not image I/O), none the rest.
        self.assertEqual(sorted(in_flight), [0, 1])
        self.assertAlmostEqual(in_flight[1], 300e-6, delta=1e-7)
        self.assertAlmostEqual(in_flight[0], 1.0 - 300e-6, delta=1e-7)

    def test_in_flight_counts_only_the_steady_state(self):
        # One request open since before the window, one inside it, one
        # after it.
        in_flight = {}
        spans._count_in_flight([(0.0, 2.0), (1.5, 1.0), (3.5, 1.0)],
                               1.0, 3.0, in_flight)
        self.assertEqual(in_flight, {1: 1.0, 2: 0.5, 0: 0.5})

    def test_in_flight_shares(self):
        self.assertEqual(spans.in_flight_shares({0: 1.0, 1: 1.0, 5: 2.0}),
                         [(0, 3, 50.0), (4, 7, 50.0)])
        self.assertEqual(spans.in_flight_shares({}), [])

    def test_summary(self):
        s = spans.summary([0.001, 0.002, 0.003])
        self.assertEqual(s["n"], 3)
        self.assertAlmostEqual(s["mean_us"], 2000.0)
        self.assertAlmostEqual(s["p50_us"], 2000.0)
        self.assertEqual(spans.summary([])["n"], 0)

    def test_device_occupancy(self):
        # (I/Os, ms in I/Os, ms busy) before and after 4 s: busy 2 of the
        # 4 s, 4 s of I/O time in 4 s of run = one I/O there on average.
        busy, depth = spans.device_occupancy((100, 1000, 500),
                                             (1100, 5000, 2500), 4.0)
        self.assertAlmostEqual(busy, 50.0)
        self.assertAlmostEqual(depth, 1.0)
        self.assertEqual(spans.device_occupancy((0, 0, 0), (1, 1, 1), 0),
                         (0.0, 0.0))


class BadInputTest(unittest.TestCase):
    def test_refuses_with_one_line_and_status_2(self):
        scratch = benchtest.Scratch()
        try:
            for args, says in [(["--runtime", "0.5"], "more than 1 s"),
                               (["--runtime", "60"], "at most 10"),
                               (["--jobs", "rr4k_qd9"], "rr4k_qd9"),
                               (["--targets", "pvdisk,qsd"], "'qsd'")]:
                p = scratch.run("spans", *args, timeout=60)
                self.assertEqual(p.returncode, 2, p.stderr)
                self.assertIn(says, p.stderr)
                self.assertEqual(len(p.stderr.strip().splitlines()), 1,
                                 p.stderr)
                scratch.check_clean(self)
        finally:
            scratch.close()


def tracefs_mounts():
    """Where tracefs is mounted now."""
    with open("/proc/self/mounts") as f:
        return {line.split()[1] for line in f if line.split()[2] == "tracefs"}


class EndToEndTest(benchtest.OneRun):
    @classmethod
    def start(cls, scratch):
        why = []
        if os.geteuid() != 0:
            why.append("not root (perf -a on tracepoints)")
        if not shutil.which("perf"):
            why.append("perf not found")
        # bench/spans mounts tracefs for its run where nothing did.
        with open("/proc/filesystems") as f:
            if "tracefs" not in f.read():
                why.append("no tracefs in this kernel")
        if not shutil.which("fio"):
            why.append("fio not found")
        if not os.access("/dev/fuse", os.R_OK | os.W_OK):
            why.append("/dev/fuse not usable")
        if not os.access(os.path.join(benchtest.build_dir(), "pvdisk"), os.X_OK):
            why.append("pvdisk not built in %s" % benchtest.build_dir())
        if why:
            raise unittest.SkipTest("; ".join(why))
        cls.tracefs_before = tracefs_mounts()
        cls.json_path = os.path.join(scratch.dir, "spans.json")
        return scratch.run("spans", "--runtime", "1.5", "--image-size", "64M",
                           "--jobs", "rr4k_qd32", "--json", cls.json_path)

    def left_behind(self):
        # perf's trace goes to /dev/shm, removed after each run; a tracefs
        # the tool mounted for its run is unmounted after it.
        return glob.glob("/dev/shm/pvdisk-spans-*") + sorted(
            tracefs_mounts() - self.tracefs_before)

    def test_prints_where_the_time_goes_for_both_servers(self):
        self.assertIn("| where a request's time goes | pvdisk us | share "
                      "| floor-disk us | share |", self.result.stdout)

    def test_spans_nest_as_the_layers_do(self):
        with open(self.json_path) as f:
            rows = json.load(f)["jobs"]["rr4k_qd32"]
        self.assertGreater(rows["native"]["fio"]["n"], 1000)
        # pvdisk, and FUSE's floor on the same image: the same layers.
        for server in ["pvdisk", "floor-disk"]:
            row = rows[server]
            for span in spans.SPANS:
                self.assertGreater(row[span]["n"], 1000, (server, span))
            # Each layer's request lies inside the one above it.
            self.assertGreaterEqual(row["fio"]["mean_us"],
                                    row["fuse"]["mean_us"], server)
            self.assertGreaterEqual(row["fuse"]["mean_us"],
                                    row["held"]["mean_us"], server)
            self.assertGreaterEqual(row["held"]["mean_us"],
                                    row["image"]["mean_us"], server)
            self.assertGreater(row["image"]["mean_us"], 0, server)
            shares = [b["share_pct"] for b in row["image_in_flight"]]
            self.assertAlmostEqual(sum(shares), 100.0, delta=0.1)
            if row["device_busy_pct"] is not None:  # on a block device
                self.assertGreater(row["device_busy_pct"], 0, server)
                self.assertGreater(row["device_depth"], 0, server)


def main():
    """unittest.main without reading the build-dir argument as a test name;
    77 (skipped) when the end-to-end run could not happen here."""
    suite = unittest.defaultTestLoader.loadTestsFromModule(sys.modules[__name__])
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    if not result.wasSuccessful():
        return 1
    return benchtest.SKIP if result.skipped else 0


if __name__ == "__main__":
    sys.exit(main())
