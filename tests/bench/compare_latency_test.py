#!/usr/bin/env python3
"""bench/compare --group latency end to end, briefly: 0.2 s per run, one
round, a 16 MiB image, the modelled-device and null pairs (the null one
beside the FUSE floor), the fsync job and the buffered sqlite job on
native, pvdisk and qsd. Every row is
printed with its command and lands in the JSON; the modelled jobs ran on
the modelled devices; nothing stays mounted and no loop device is left."""
import glob
import json
import os
import subprocess

import benchtest

JOBS = ["delay40_qd1", "null_qd1", "wr4k_fsync_qd1", "sqlite_buffered"]
# The modelled jobs have no native.
ROWS = [("delay40_qd1", "pvdisk"), ("delay40_qd1", "qsd"),
        ("delay40_qd1", "floor-disk"),
        ("null_qd1", "pvdisk"), ("null_qd1", "qsd"),
        ("null_qd1", "floor-uring"),
        ("wr4k_fsync_qd1", "native"), ("wr4k_fsync_qd1", "pvdisk"),
        ("wr4k_fsync_qd1", "qsd"), ("wr4k_fsync_qd1", "floor-disk"),
        ("sqlite_buffered", "native"), ("sqlite_buffered", "pvdisk"),
        ("sqlite_buffered", "qsd"), ("sqlite_buffered", "floor-disk")]


class CompareLatencyTest(benchtest.OneRun):
    @classmethod
    def start(cls, scratch):
        result = scratch.run("compare", "--group", "latency", "--runtime",
                             "0.2", "--rounds", "1", "--image-size", "16M",
                             "--jobs", ",".join(JOBS),
                             "--targets", "native,pvdisk,qsd,floor-uring,floor-disk",
                             "--out", scratch.out)
        found = glob.glob(os.path.join(scratch.out, "compare-*.json"))
        cls.json_path = found[0] if len(found) == 1 else None
        return result

    def test_rows_commands_and_goals(self):
        with open(self.json_path) as f:
            data = json.load(f)
        self.assertEqual(data["group"], "latency")
        self.assertEqual([(r["job"], r["target"]) for r in data["rows"]], ROWS)
        for row in data["rows"]:
            self.assertGreater(row["iops"], 0, row)
            if row["target"] == "pvdisk":
                self.assertIsInstance(row["vs_qsd"], float, row)
                self.assertGreater(row["counters"]["fuse_reads"] +
                                   row["counters"]["fuse_writes"], 0, row)
        self.assertIn("--fsync=1", data["jobs"]["wr4k_fsync_qd1"]["command"])
        self.assertIn("latency-ns=40000",
                      data["jobs"]["delay40_qd1"]["command"])
        self.assertIn("delay=40", data["jobs"]["delay40_qd1"]["command"])
        self.assertIn("--direct-io=off",
                      data["jobs"]["sqlite_buffered"]["command"])
        for job in JOBS:
            self.assertIn("- %s: `" % job, self.result.stdout)
        goals = {g["what"]: g for g in data["goals"]}
        self.assertIn("delay40_qd1 pvdisk / qsd", goals)
        cost = goals["delay40_qd1 path cost, us (pvdisk lat - 40)"]
        # fio's whole latency: a round trip through FUSE cannot take less
        # than the modelled device's 40 us (clat can: fio.parse).
        pv_delay = [r for r in data["rows"]
                    if (r["job"], r["target"]) == ("delay40_qd1", "pvdisk")][0]
        self.assertGreater(pv_delay["lat_us"], 40, pv_delay)
        self.assertAlmostEqual(cost["value"], pv_delay["lat_us"] - 40)
        # FUSE alone beside the null pair: its ratio to qsd and its round
        # trip, and pvdisk's ratio to it.
        by = {(r["job"], r["target"]): r for r in data["rows"]}
        floor = by[("null_qd1", "floor-uring")]
        self.assertIsInstance(floor["vs_qsd"], float, floor)
        self.assertIsInstance(by[("null_qd1", "pvdisk")]["vs_floor"], float)
        self.assertAlmostEqual(
            goals["null_qd1 floor-uring lat, us (FUSE's round trip, "
                  "nothing served)"]["value"], floor["lat_us"])
        self.assertIn("| vs_floor |", self.result.stdout)
        self.assertAlmostEqual(
            goals["null_qd1 pvdisk's own time, us (pvdisk lat - floor-uring "
                  "lat)"]["value"],
            by[("null_qd1", "pvdisk")]["lat_us"] - floor["lat_us"])
        # The delay engine without the transport beside the modelled
        # device: no faster than the device, its path cost printed.
        delay_floor = by[("delay40_qd1", "floor-disk")]
        self.assertGreater(delay_floor["lat_us"], 40, delay_floor)
        self.assertAlmostEqual(
            goals["delay40_qd1 floor-disk path cost, us (lat - 40: the delay "
                  "engine without the transport)"]["value"],
            delay_floor["lat_us"] - 40)
        # FUSE with the image beside the image jobs, fsync and sqlite's
        # filesystem included: its ratio to qsd, pvdisk's to it.
        for job in ("wr4k_fsync_qd1", "sqlite_buffered"):
            self.assertIsInstance(by[(job, "floor-disk")]["vs_qsd"], float)
            self.assertIsInstance(by[(job, "pvdisk")]["vs_floor_disk"],
                                  float)
            self.assertIn("%s floor-disk / qsd (FUSE with the image, no "
                          "transport)" % job, goals)
        for goal in data["goals"]:
            self.assertIn(goal["met"], (True, False), goal["what"])

    def test_no_loop_device_left(self):
        listed = subprocess.run(["losetup", "-a"], text=True,
                                capture_output=True).stdout
        self.assertNotIn(self.scratch.dir, listed)


class CompareLatencyOptionsTest(benchtest.unittest.TestCase):
    def test_a_job_of_another_group_is_refused(self):
        scratch = benchtest.Scratch()
        try:
            result = scratch.run("compare", "--group", "latency", "--jobs",
                                 "rr4k_qd32")
        finally:
            scratch.close()
        self.assertEqual(result.returncode, 2)
        self.assertIn("rr4k_qd32 not in group latency", result.stderr)

    def test_a_realtime_priority_out_of_range_is_refused(self):
        scratch = benchtest.Scratch()
        try:
            result = scratch.run("compare", "--group", "latency",
                                 "--realtime", "100")
        finally:
            scratch.close()
        self.assertEqual(result.returncode, 2)
        self.assertIn("100 out of range; use 1 to 99", result.stderr)


if __name__ == "__main__":
    benchtest.need("fio", "qemu-storage-daemon", "losetup", "mkfs.ext4")
    if os.geteuid() != 0:
        print("SKIP: the sqlite job needs root (losetup, mount)")
        raise SystemExit(benchtest.SKIP)
    benchtest.main()
