#!/usr/bin/env python3
"""bench/compare end to end, briefly: 0.2 s per run, one round, a 16 MiB image,
all ten targets and all six jobs. Every row is printed and lands in valid
JSON with every field; nothing stays mounted."""
import glob
import json
import os
import re
import shutil

import benchtest
from pvbench import fio

TARGETS = ["native", "pvdisk", "pvdisk-thread", "pvdisk-classic", "null",
           "null-uring", "qsd", "floor", "floor-uring", "floor-disk"]
PVDISK_TARGETS = ["pvdisk", "pvdisk-thread", "pvdisk-classic", "null",
                  "null-uring"]
COLUMNS = ["job", "target", "iops", "mib_s", "mean_us", "p99_us", "vs_native",
           "vs_qsd", "vs_floor_disk", "ring_reqs_per_fuse", "avg_req_kib", "kicks_per_req",
           "irqs_per_req", "inflight_max", "cpu_busy_pct", "cpu_us_per_io"]
PVDISK_ONLY = ["vs_qsd", "vs_floor_disk", "ring_reqs_per_fuse", "avg_req_kib", "kicks_per_req",
               "irqs_per_req", "inflight_max"]


class CompareTest(benchtest.OneRun):
    @classmethod
    def start(cls, scratch):
        result = scratch.run("compare", "--runtime", "0.2", "--rounds", "1",
                             "--image-size", "16M", "--out", scratch.out)
        found = glob.glob(os.path.join(scratch.out, "compare-*.json"))
        cls.json_path = found[0] if len(found) == 1 else None
        return result

    def test_prints_every_row(self):
        lines = self.result.stdout.splitlines()
        self.assertIn("| " + " | ".join(COLUMNS) + " |", lines)
        for job in fio.MATRIX:
            for target in TARGETS:
                row = [l for l in lines if l.startswith("| %s | %s | " % (job, target))]
                self.assertEqual(len(row), 1, (job, target))
                self.assertEqual(row[0].count("|"), len(COLUMNS) + 1)
        self.assertRegex(self.result.stdout, r"VmRSS [0-9.]+ MiB")
        self.assertRegex(self.result.stdout, r"\| rr4k_qd32 null IOPS \| [0-9]+ \| >= 250000 \| (met|not met) \|")

    def test_json_has_every_field(self):
        self.assertIsNotNone(self.json_path)
        with open(self.json_path) as f:
            data = json.load(f)
        self.assertTrue(os.path.exists(self.json_path[:-5] + ".md"))
        self.assertEqual(data["image_bytes"], 16 << 20)
        self.assertEqual(list(data["targets"]), TARGETS)
        self.assertEqual(data["targets"]["null"]["config"]["engine"], "null")
        self.assertEqual(data["targets"]["null"]["config"]["fuse_io"], "classic")
        self.assertEqual(data["targets"]["null-uring"]["config"]["fuse_io"], "uring")
        self.assertEqual(data["targets"]["pvdisk-classic"]["config"]["fuse_io"], "classic")
        pvdisk_config = data["targets"]["pvdisk"]["config"]
        if pvdisk_config["fuse_io"] == "uring":
            self.assertEqual(pvdisk_config["placement"], "inline")
        self.assertEqual(data["targets"]["pvdisk-thread"]["config"]["placement"],
                         "backend-thread")
        self.assertEqual(list(data["jobs"]), list(fio.MATRIX))
        for job in data["jobs"].values():
            self.assertIn("--filename=TARGET", job["command"])
        self.assertEqual([(r["job"], r["target"]) for r in data["rows"]],
                         [(j, t) for j in fio.MATRIX for t in TARGETS])
        for row in data["rows"]:
            pvdisk = row["target"] in PVDISK_TARGETS
            for column in COLUMNS[2:]:
                value = row[column]
                if pvdisk or column not in PVDISK_ONLY:
                    self.assertIsInstance(value, (int, float), (row["job"], row["target"], column))
                else:
                    self.assertIsNone(value, (row["job"], row["target"], column))
            self.assertGreater(row["iops"], 0)
            self.assertEqual(len(row["rounds"]), 1)
            if pvdisk:
                self.assertGreater(row["counters"]["fuse_reads"] + row["counters"]["fuse_writes"], 0)
            else:
                self.assertIsNone(row["counters"])
        self.assertGreater(data["pvdisk_memory_kib"]["VmRSS"], 0)
        self.assertEqual(len(data["goals"]), 2 * len(fio.MATRIX) + 3)
        for goal in data["goals"]:
            self.assertIn(goal["met"], (True, False), goal["what"])


class CompareQcow2Test(benchtest.OneRun):
    """The qcow2 targets: qsd-qcow2 serves the filled image converted to
    qcow2 beside native, the allocating job runs for it on an empty qcow2
    image, and the compressed job on a compressed one: --jobs names them
    (the backing-file jobs, not named, do not run). (pvdisk-qcow2 is the
    same mount with format=qcow2.)"""

    @classmethod
    def start(cls, scratch):
        result = scratch.run("compare", "--runtime", "0.2", "--rounds", "1",
                             "--image-size", "16M", "--jobs",
                             "rr4k_qd32,alloc4k_qd32,compressed1m_qd4",
                             "--targets", "native,qsd-qcow2",
                             "--out", scratch.out)
        found = glob.glob(os.path.join(scratch.out, "compare-*.json"))
        cls.json_path = found[0] if len(found) == 1 else None
        return result

    def test_rows_and_the_allocating_job(self):
        with open(self.json_path) as f:
            data = json.load(f)
        self.assertEqual([(r["job"], r["target"]) for r in data["rows"]],
                         [("rr4k_qd32", "native"), ("rr4k_qd32", "qsd-qcow2"),
                          ("alloc4k_qd32", "qsd-qcow2"),
                          ("compressed1m_qd4", "qsd-qcow2")])
        for row in data["rows"]:
            self.assertGreater(row["iops"], 0, row)
        self.assertEqual(list(data["jobs"]),
                         ["rr4k_qd32", "alloc4k_qd32", "compressed1m_qd4"])
        self.assertEqual(data["jobs"]["compressed1m_qd4"]["options"],
                         "rw=read bs=1m iodepth=4")
        self.assertEqual(data["jobs"]["alloc4k_qd32"]["options"],
                         fio.MATRIX["rw4k_qd32"])
        self.assertIn("driver=qcow2 over its file with aio=io_uring, "
                      "cache.direct=on", self.result.stdout)
        self.assertRegex(self.result.stderr, r"alloc4k_qd32 round 1 qsd-qcow2")
        self.assertRegex(self.result.stderr,
                         r"compressed1m_qd4 round 1 qsd-qcow2")


class CompareBaseBuildTest(benchtest.OneRun):
    """--base-build: a second build's pvdisk (here a copy of this one in the
    scratch folder) as target pvdisk-base beside pvdisk, a vs_base column,
    and rounds that alternate their order (ABBA)."""

    @classmethod
    def start(cls, scratch):
        cls.base = os.path.join(scratch.dir, "base")
        os.makedirs(cls.base)
        shutil.copy2(os.path.join(benchtest.build_dir(), "pvdisk"), cls.base)
        result = scratch.run("compare", "--runtime", "0.2", "--rounds", "2",
                             "--image-size", "16M", "--jobs", "rr4k_qd32",
                             "--targets", "native,pvdisk,pvdisk-base",
                             "--base-build", cls.base, "--out", scratch.out)
        found = glob.glob(os.path.join(scratch.out, "compare-*.json"))
        cls.json_path = found[0] if len(found) == 1 else None
        return result

    def test_rows_and_ratios(self):
        with open(self.json_path) as f:
            data = json.load(f)
        rows = {r["target"]: r for r in data["rows"]}
        self.assertEqual(list(rows), ["native", "pvdisk", "pvdisk-base"])
        self.assertEqual(data["targets"]["pvdisk-base"]["program"],
                         os.path.join(self.base, "pvdisk"))
        self.assertEqual(data["targets"]["pvdisk"]["program"],
                         os.path.join(benchtest.build_dir(), "pvdisk"))
        self.assertEqual(data["targets"]["pvdisk-base"]["config"],
                         data["targets"]["pvdisk"]["config"])
        self.assertEqual(rows["pvdisk-base"]["vs_base"], 1.0)
        pvdisk = rows["pvdisk"]
        per_round = sorted(a["iops"] / b["iops"] for a, b in
                           zip(pvdisk["rounds"], rows["pvdisk-base"]["rounds"]))
        self.assertAlmostEqual(pvdisk["vs_base"], sum(per_round) / 2, places=6)
        self.assertIsNone(rows["native"]["vs_base"])
        self.assertGreater(rows["pvdisk-base"]["counters"]["fuse_reads"], 0)
        header = [l for l in self.result.stdout.splitlines()
                  if l.startswith("| job |")]
        self.assertEqual(len(header), 1)
        self.assertIn("| vs_native | vs_base | vs_qsd |", header[0])
        self.assertIn("pvdisk-base (pvdisk mount (no flags); %s/pvdisk)"
                      % self.base, self.result.stdout)

    def test_rounds_alternate_their_order(self):
        runs = re.findall(r"round (\d) (\S+):", self.result.stderr)
        self.assertEqual(runs, [("1", "native"), ("1", "pvdisk"),
                                ("1", "pvdisk-base"), ("2", "pvdisk-base"),
                                ("2", "pvdisk"), ("2", "native")])


class CompareWarmupTest(benchtest.OneRun):
    """--warmup: before a job's measured rounds, one run of it on every
    target in the first round's order, not among the rows' rounds."""

    @classmethod
    def start(cls, scratch):
        result = scratch.run("compare", "--runtime", "0.5", "--rounds", "2",
                             "--image-size", "64M", "--jobs",
                             "rr4k_qd1,rr4k_qd32", "--targets",
                             "native,pvdisk", "--warmup", "0.5",
                             "--out", scratch.out)
        found = glob.glob(os.path.join(scratch.out, "compare-*.json"))
        cls.json_path = found[0] if len(found) == 1 else None
        return result

    def test_each_job_warms_every_target_first(self):
        # "[warm-up] JOB TARGET: ..." and "[n/N] JOB round R TARGET: ...".
        seen = [tuple(w for w in m if w) for m in re.findall(
            r"^\[warm-up\] (\S+) (\S+):|^\[\d+/\d+\] (\S+) (round \d) (\S+):",
            self.result.stderr, re.M)]
        expected = []
        for job in ("rr4k_qd1", "rr4k_qd32"):
            expected += [(job, "native"), (job, "pvdisk"),
                         (job, "round 1", "native"), (job, "round 1", "pvdisk"),
                         (job, "round 2", "pvdisk"), (job, "round 2", "native")]
        self.assertEqual(seen, expected, self.result.stderr)

    def test_warmup_runs_are_not_measured(self):
        with open(self.json_path) as f:
            data = json.load(f)
        self.assertEqual(data["warmup_s"], 0.5)
        for row in data["rows"]:
            self.assertEqual(len(row["rounds"]), 2, row)
        self.assertIn("Each job began with a warm-up round that is not "
                      "measured: 0.5 s on every target.", self.result.stdout)
        # The progress count is of measured runs only.
        self.assertIn("[8/8] rr4k_qd32 round 2 native:", self.result.stderr)

    def test_refuses_a_negative_warmup(self):
        p = self.scratch.run("compare", "--warmup", "-1")
        self.assertEqual(p.returncode, 2)
        self.assertIn("argument --warmup: '-1' is not allowed", p.stderr)


if __name__ == "__main__":
    benchtest.need("fio", "qemu-storage-daemon", "qemu-img")
    benchtest.main()
