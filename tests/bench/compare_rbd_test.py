#!/usr/bin/env python3
"""bench/compare --rbd end to end, briefly: its own one-node Ceph cluster,
a 32 MiB RBD image, 1 s per run, one round, two jobs, the five targets
(pvdisk's rbd engine, qemu-storage-daemon's driver=rbd export, rbd bench,
fio's rbd engine, fuse_floor on the rbd engine), each job after a
warm-up round. Every row has numbers; the JSON says rbd; the OSD's cache
(scripts/ceph-cluster.sh's settings, read from the OSD) held the image
after the fill and the read, and served every read of the runs; nothing
stays mounted or running."""
import glob
import json
import os
import re
import shutil
import subprocess

import benchtest

TARGETS = ["pvdisk", "qsd", "rbd-bench", "fio-rbd", "floor-disk"]
JOBS = ["rr4k_qd32", "sw1m_qd4"]


def ceph_daemons_under(path):
    """Live ceph-mon/ceph-osd processes whose command line names `path`."""
    ps = subprocess.run(["ps", "-eo", "stat=,args="], text=True,
                        capture_output=True).stdout
    return [l for l in ps.splitlines()
            if not l.startswith("Z") and ("ceph-mon" in l or "ceph-osd" in l)
            and path in l]


class CompareRbdTest(benchtest.OneRun):
    @classmethod
    def start(cls, scratch):
        result = scratch.run("compare", "--rbd", "--runtime", "1",
                             "--rounds", "1", "--image-size", "32M",
                             "--jobs", ",".join(JOBS),
                             "--out", scratch.out, timeout=220)
        found = glob.glob(os.path.join(scratch.out, "compare-rbd-*.json"))
        cls.json_path = found[0] if len(found) == 1 else None
        return result

    def left_behind(self):
        return ceph_daemons_under(self.scratch.dir)

    def test_rows_and_goals(self):
        self.assertIsNotNone(self.json_path, self.result.stderr)
        with open(self.json_path) as f:
            data = json.load(f)
        self.assertTrue(data["rbd"])
        self.assertEqual(list(data["targets"]), TARGETS)
        config = data["targets"]["pvdisk"]["config"]
        self.assertEqual(config["engine"], "rbd")
        self.assertTrue(config["image"].startswith("rbd:rbd/compare-"))
        self.assertEqual([(r["job"], r["target"]) for r in data["rows"]],
                         [(j, t) for j in JOBS for t in TARGETS])
        for row in data["rows"]:
            self.assertGreater(row["iops"], 0, row)
            self.assertGreater(row["mib_s"], 0, row)
            self.assertIsInstance(row["vs_rbd"], float, row)
            self.assertIsInstance(row["vs_fio_rbd"], float, row)
            if row["target"] == "pvdisk":
                self.assertIsInstance(row["vs_floor_disk"], float, row)
            else:
                self.assertIsNone(row["vs_floor_disk"], row)
        # With --rbd each job starts with a warm-up round (--runtime s on
        # every target, in the first round's order) that is not measured.
        self.assertEqual(data["warmup_s"], 1)
        for row in data["rows"]:
            self.assertEqual(len(row["rounds"]), 1, row)
        for job in JOBS:
            self.assertEqual(re.findall(r"^\[warm-up\] %s (\S+):" % job,
                                        self.result.stderr, re.M), TARGETS)
        self.check_osd_cache(data)
        self.assertEqual(len(data["goals"]), 6)
        measured = [g for g in data["goals"] if g["value"] is not None]
        self.assertEqual(len(measured), 4)  # rw4k_qd32 was not run
        self.assertIn("| rr4k_qd32 | rbd-bench |", self.result.stdout)
        self.assertIn("| sw1m_qd4 | fio-rbd |", self.result.stdout)
        self.assertIn("| sw1m_qd4 | floor-disk |", self.result.stdout)

    def check_osd_cache(self, data):
        """The cluster's cache settings in effect (the OSD's own `config
        show`): fixed, one shard per placement group, its data share
        larger than a 1 GiB image, writes kept. The image was read once
        after the fill (the line on stderr), and the OSD then held all of
        it; every read of the runs came from its cache (the rr4k_qd32 rows:
        reads; sw1m_qd4 writes whole 1 MiB blocks and reads nothing)."""
        osd = data["osd_cache"]
        self.assertFalse(osd["autotune"], osd)
        self.assertTrue(osd["buffered_write"], osd)
        self.assertEqual(osd["shards"], 8, osd)
        self.assertGreater(osd["data_mib"], 1024, osd)
        self.assertIn("compare: reading it once", self.result.stderr)
        self.assertGreaterEqual(osd["warming"]["osd_read_mib"], 32, osd)
        self.assertGreaterEqual(osd["cached_mib"], 32, osd)
        for row in data["rows"]:
            for r in row["rounds"]:
                if row["job"] == "rr4k_qd32":
                    self.assertGreater(r["osd_read_mib"], 0, row)
                    self.assertEqual(r["osd_hit_pct"], 100.0, row)
                else:
                    self.assertLess(r["osd_read_mib"], 1, row)
            if row["job"] == "rr4k_qd32":
                self.assertEqual(row["osd_hit_pct_min"], 100.0, row)
        self.assertIn("buffered writes on", self.result.stdout)
        # Column osd_hit_pct_min follows iops, mib_s, mean_us, p99_us.
        self.assertRegex(self.result.stdout,
                         r"\| rr4k_qd32 \| pvdisk \|( [^|]+ \|){4} 100 \|")

    def test_refuses_file_targets_with_rbd(self):
        p = self.scratch.run("compare", "--rbd", "--targets", "native")
        self.assertEqual(p.returncode, 2)
        self.assertIn("not allowed with --rbd", p.stderr)


class CompareRbdBaseBuildTest(benchtest.OneRun):
    """--rbd --base-build: another build's pvdisk (a copy of this one) as
    target pvdisk-base on the same RBD image, and a vs_base column."""

    @classmethod
    def start(cls, scratch):
        cls.base = os.path.join(scratch.dir, "base")
        os.makedirs(cls.base)
        shutil.copy2(os.path.join(benchtest.build_dir(), "pvdisk"), cls.base)
        result = scratch.run("compare", "--rbd", "--runtime", "1",
                             "--rounds", "2", "--image-size", "32M",
                             "--jobs", "rr4k_qd32", "--targets",
                             "pvdisk,pvdisk-base,qsd", "--base-build",
                             cls.base, "--out", scratch.out, timeout=220)
        found = glob.glob(os.path.join(scratch.out, "compare-rbd-*.json"))
        cls.json_path = found[0] if len(found) == 1 else None
        return result

    def left_behind(self):
        return ceph_daemons_under(self.scratch.dir)

    def test_base_build_on_the_same_image(self):
        self.assertIsNotNone(self.json_path, self.result.stderr)
        with open(self.json_path) as f:
            data = json.load(f)
        self.assertEqual(list(data["targets"]), ["pvdisk", "pvdisk-base",
                                                 "qsd"])
        base = data["targets"]["pvdisk-base"]
        self.assertEqual(base["program"], os.path.join(self.base, "pvdisk"))
        self.assertEqual(base["config"], data["targets"]["pvdisk"]["config"])
        self.assertTrue(base["config"]["image"].startswith("rbd:rbd/compare-"))
        rows = {r["target"]: r for r in data["rows"]}
        self.assertEqual(rows["pvdisk-base"]["vs_base"], 1.0)
        self.assertGreater(rows["pvdisk-base"]["counters"]["fuse_reads"], 0)
        per_round = sorted(a["iops"] / b["iops"] for a, b in
                           zip(rows["pvdisk"]["rounds"],
                               rows["pvdisk-base"]["rounds"]))
        self.assertAlmostEqual(rows["pvdisk"]["vs_base"],
                               sum(per_round) / 2, places=6)
        self.assertIsNone(rows["qsd"]["vs_base"])
        header = [l for l in self.result.stdout.splitlines()
                  if l.startswith("| job |")]
        self.assertEqual(len(header), 1)
        self.assertIn("| vs_rbd | vs_fio_rbd | vs_base | vs_qsd |", header[0])
        runs = re.findall(r"round (\d) (\S+):", self.result.stderr)
        self.assertEqual(runs, [("1", "pvdisk"), ("1", "pvdisk-base"),
                                ("1", "qsd"), ("2", "qsd"),
                                ("2", "pvdisk-base"), ("2", "pvdisk")])


if __name__ == "__main__":
    benchtest.need("fio", "qemu-storage-daemon", "rbd", "ceph-mon", "ceph-osd")
    benchtest.main()
