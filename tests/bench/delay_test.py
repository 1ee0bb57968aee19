#!/usr/bin/env python3
"""bench/delay, briefly: D = 1 ms at iodepth 1 and 2 in both queue configs,
a small capped / uncapped comparison (as is and with a FUSE queue depth)
and the ceiling at iodepth 2, 0.2 s per run on a 16 MiB image.
The table has a row per run with every column, no mean comes in under D
(the delay is a floor, whatever the load), the placement column says
where each config ran, and nothing stays mounted. Bad options end in one
line and status 2."""
import json
import os
import re
import shutil

import benchtest

HEAD = ["delay_us", "config", "placement", "iodepth", "iops", "clat_mean_us",
        "ratio", "verdict", "pvdisk_mean_us", "pvdisk_p50_us"]


class DelayJson:
    """What one bench/delay run wrote, for the OneRun tests of its runs."""

    def load(self):
        with open(os.path.join(self.scratch.out, "delay.json")) as f:
            return json.load(f)


class DelayTest(DelayJson, benchtest.OneRun):
    @classmethod
    def start(cls, scratch):
        return scratch.run("delay", "--delays", "1000:2", "--runtime", "0.2",
                           "--cap-delay", "1000", "--cap-depth", "16",
                           "--cap", "8", "--cap-fuse-depth", "32",
                           "--ceiling-depths", "2", "--image-size", "16M",
                           "--out", scratch.out)

    def test_table_has_a_row_per_run(self):
        header = "| " + " | ".join(HEAD) + " |"
        with open(os.path.join(self.scratch.out, "delay.md")) as f:
            md = f.read()
        self.assertIn(header, md)
        self.assertIn(header, self.result.stdout)
        self.assertIn("Load average (1/5/15 min) before: ", md)
        rows = self.load()["rows"]
        self.assertEqual([(r["config"], r["iodepth"]) for r in rows],
                         [("one", 1), ("one", 2), ("default", 1),
                          ("default", 2)])
        for row in rows:
            self.assertEqual(row["delay_us"], 1000)
            self.assertGreater(row["iops"], 0)
            self.assertAlmostEqual(row["ratio"], row["clat_mean_us"] / 1000)
            self.assertTrue(row["verdict"] == "pass" or
                            row["verdict"].startswith("FAIL"), row)

    def test_delay_is_a_floor(self):
        for row in self.load()["rows"]:
            self.assertGreaterEqual(row["clat_mean_us"], 1000, row)
            self.assertNotEqual(row["verdict"], "FAIL (below D)", row)
            # Inside pvdisk too: its latency of the same reads.
            self.assertGreaterEqual(row["pvdisk_mean_us"], 1000, row)
            self.assertGreaterEqual(row["pvdisk_p50_us"], 1000, row)

    def test_configs_say_where_they_ran(self):
        rows = self.load()["rows"]
        self.assertEqual({r["placement"] for r in rows if r["config"] == "one"},
                         {"backend-thread"})
        default = {r["placement"] for r in rows if r["config"] == "default"}
        self.assertTrue(default <= {"inline", "backend-thread"}, default)

    def test_cap_comparison(self):
        cap = self.load()["cap"]
        self.assertEqual((cap["delay_us"], cap["iodepth"], cap["cap"]),
                         (1000, 16, 8))
        self.assertGreater(cap["capped_iops"], 0)
        self.assertAlmostEqual(cap["ratio"],
                               cap["uncapped_iops"] / cap["capped_iops"])
        self.assertIn("Engine cap at D = 1000 us, iodepth 16", self.result.stdout)
        # Again with FUSE's queue as deep as asked.
        again = self.load()["cap_fuse"]
        self.assertEqual(again["flags"][-2:], ["--fuse-queue-depth", "32"])
        self.assertGreater(again["capped_iops"], 0)
        self.assertIn("--fuse-queue-depth 32`: uncapped", self.result.stdout)

    def test_ceiling(self):
        # Per config, the null engine without a delay at iodepth 2, beside
        # the IOPS a 1 ms mean needs there (2 / 1 ms).
        ceiling = self.load()["ceiling"]
        self.assertEqual([(r["config"], r["iodepth"]) for r in ceiling],
                         [("one", 2), ("default", 2)])
        for row in ceiling:
            self.assertGreater(row["iops"], 0)
            self.assertEqual(row["iops_for_1000us"], 2000)
        self.assertIn("| config | placement | iodepth | iops | clat_mean_us "
                      "| iops_for_1000us |", self.result.stdout)


class FloorTest(DelayJson, benchtest.OneRun):
    """The floor configs beside pvdisk's default: rows of each, the floor's
    own cap check, and the ceiling at the rows' iodepths."""
    @classmethod
    def start(cls, scratch):
        return scratch.run("delay", "--delays", "1000:2", "--runtime", "0.2",
                           "--configs", "default,floor,floor-spin",
                           "--cap-delay", "1000", "--cap-depth", "16",
                           "--cap", "4", "--cap-fuse-depth", "32",
                           "--ceiling-depths", "rows", "--image-size", "16M",
                           "--out", scratch.out)

    def test_rows_of_each_config(self):
        rows = self.load()["rows"]
        self.assertEqual([(r["config"], r["iodepth"]) for r in rows],
                         [("default", 1), ("default", 2), ("floor", 1),
                          ("floor", 2), ("floor-spin", 1), ("floor-spin", 2)])
        for row in rows:
            self.assertGreater(row["iops"], 0, row)
            # The delay is a floor on the floor too.
            self.assertGreaterEqual(row["clat_mean_us"], 1000, row)
            if row["config"].startswith("floor"):
                self.assertEqual(row["placement"], row["config"])
                self.assertEqual(row["pvdisk_mean_us"], "-")
            else:
                self.assertGreaterEqual(row["pvdisk_mean_us"], 1000, row)

    def test_cap_check_on_the_floor(self):
        data = self.load()
        cap = data["cap_floor"]
        self.assertEqual((cap["delay_us"], cap["iodepth"], cap["cap"]),
                         (1000, 16, 4))
        self.assertEqual(cap["flags"][:3], ["fuse_floor", "uring", "32"])
        self.assertGreater(cap["capped_iops"], 0)
        # Four at once held 1 ms each: at most 4000 a second (a bound).
        self.assertLessEqual(cap["capped_iops"], 4000 * 1.05)
        self.assertIn("max-inflight=4", self.result.stdout)
        self.assertIsNotNone(data["cap"])  # pvdisk's, for default

    def test_ceiling_at_the_rows_depths(self):
        ceiling = self.load()["ceiling"]
        self.assertEqual([(r["config"], r["iodepth"]) for r in ceiling],
                         [(c, d) for c in ("default", "floor", "floor-spin")
                          for d in (1, 2)])
        for row in ceiling:
            self.assertGreater(row["iops"], 0, row)


class BaseBuildTest(DelayJson, benchtest.OneRun):
    """--base-build: each pvdisk config again as CONFIG-base by another
    build's pvdisk (here a copy of this one in the scratch folder), beside
    it and alternately; floor configs have no twin."""
    @classmethod
    def start(cls, scratch):
        cls.base = os.path.join(scratch.dir, "base")
        os.makedirs(cls.base)
        shutil.copy2(os.path.join(benchtest.build_dir(), "pvdisk"), cls.base)
        return scratch.run("delay", "--delays", "1000:2", "--runtime", "0.5",
                           "--configs", "one,floor", "--no-cap",
                           "--ceiling-depths", "0", "--image-size", "64M",
                           "--base-build", cls.base, "--out", scratch.out)

    def test_rows_of_each_build(self):
        data = self.load()
        self.assertEqual(data["base_build"], self.base)
        rows = data["rows"]
        self.assertEqual([(r["config"], r["iodepth"]) for r in rows],
                         [(c, d) for c in ("one", "one-base", "floor")
                          for d in (1, 2)])
        programs = {r["config"]: r["program"] for r in rows}
        self.assertEqual(programs["one"],
                         os.path.join(benchtest.build_dir(), "pvdisk"))
        self.assertEqual(programs["one-base"],
                         os.path.join(self.base, "pvdisk"))
        for row in rows:
            self.assertGreaterEqual(row["clat_mean_us"], 1000, row)
            if row["config"] != "floor":
                # The base mount is config one too, and pvdisk's own.
                self.assertEqual(row["placement"], "backend-thread", row)
                self.assertGreaterEqual(row["pvdisk_mean_us"], 1000, row)
        self.assertIn("CONFIG-base: the same by %s/pvdisk" % self.base,
                      self.result.stdout)

    def test_configs_alternate(self):
        runs = re.findall(r"D=1000 (\S+) iodepth (\d)", self.result.stderr)
        self.assertEqual(runs, [("one", "1"), ("one-base", "1"),
                                ("floor", "1"), ("floor", "2"),
                                ("one-base", "2"), ("one", "2")])


class RefusedOnOneLine:
    """A run refused before it starts: exit 2, one line naming what was
    wrong (expected_message()), nothing left behind, no results folder."""

    def test_finishes_and_cleans_up(self):
        self.assertEqual(self.result.returncode, 2, self.result.stderr)
        self.scratch.check_clean(self)

    def test_one_line_naming_the_value(self):
        lines = self.result.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, self.result.stderr)
        self.assertIn(self.expected_message(), lines[0])
        self.assertFalse(os.path.exists(self.scratch.out))


class BadBaseBuildTest(RefusedOnOneLine, benchtest.OneRun):
    @classmethod
    def start(cls, scratch):
        return scratch.run("delay", "--base-build",
                           os.path.join(scratch.dir, "nothing"),
                           "--out", scratch.out)

    def expected_message(self):
        return "--base-build: %s/nothing/pvdisk not found" % self.scratch.dir


class BadOptionsTest(RefusedOnOneLine, benchtest.OneRun):
    @classmethod
    def start(cls, scratch):
        return scratch.run("delay", "--delays", "500:0", "--out", scratch.out)

    def expected_message(self):
        return "'500:0' is not allowed"


if __name__ == "__main__":
    benchtest.need("fio")
    benchtest.main()
