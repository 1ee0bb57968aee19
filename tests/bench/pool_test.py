#!/usr/bin/env python3
"""bench/pool: the pooled ratio of two real bench/compare runs is the
median of their per-round ratios, read back from the runs' own reports;
the interval and verdict follow the binomial order statistics; a report
without the targets is refused in one line with status 2."""
import json
import os
import statistics
import subprocess
import sys
import unittest

import benchtest

sys.path.insert(0, benchtest.BENCH)
from pvbench import pooling  # noqa: E402

POOL = os.path.join(benchtest.BENCH, "pool")


def pool(*args):
    return subprocess.run([sys.executable, POOL] + list(args), text=True,
                          capture_output=True, timeout=60)


def table_row(stdout, job):
    """The cells of `job`'s row of bench/pool's table."""
    for line in stdout.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells and cells[0] == job:
            return cells
    raise AssertionError("no row for %s in:\n%s" % (job, stdout))


class PoolOfTwoCompareRunsTest(benchtest.OneRun):
    """Two short bench/compare runs of one build beside itself, pooled."""

    @classmethod
    def start(cls, scratch):
        cls.reports = []
        for name in ("a", "b"):
            path = os.path.join(scratch.out, name + ".json")
            done = scratch.run("compare", "--base-build", benchtest.build_dir(),
                               "--targets", "pvdisk,pvdisk-base", "--jobs",
                               "rr4k_qd32", "--rounds", "3",
                               "--runtime", "0.2", "--image-size", "16M",
                               "--out", scratch.out, "--json", path)
            if done.returncode != 0:
                return done
            cls.reports.append(path)
        return pool("--goal", "0.5", "--out",
                    os.path.join(scratch.out, "pool.md"), *cls.reports)

    def ratios(self, job):
        out = []
        for path in self.reports:
            with open(path) as f:
                rows = {(r["job"], r["target"]): r for r in json.load(f)["rows"]}
            a, b = rows[(job, "pvdisk")], rows[(job, "pvdisk-base")]
            out += [x["iops"] / y["iops"]
                    for x, y in zip(a["rounds"], b["rounds"])]
        return out

    def test_pooled_median_is_the_median_of_every_round(self):
        for job in ("rr4k_qd32",):
            ratios = self.ratios(job)
            self.assertEqual(len(ratios), 6)
            row = table_row(self.result.stdout, job)
            self.assertEqual(row[1], "6")  # rounds
            self.assertEqual(row[2], "2")  # runs
            self.assertEqual(row[4], "%.2f" % statistics.median(ratios))
            low, high = pooling.median_interval(ratios)
            self.assertEqual(row[6], "%.2f-%.2f" % (low, high))
            self.assertEqual(row[7], pooling.verdict((low, high), 0.5))

    def test_report_names_each_run_and_the_table_is_written(self):
        for path in self.reports:
            self.assertIn(os.path.basename(path), self.result.stdout)
        self.assertIn("pvdisk `pvdisk`, pvdisk-base `pvdisk`",
                      self.result.stdout)
        with open(os.path.join(self.scratch.out, "pool.md")) as f:
            self.assertEqual(f.read(), self.result.stdout)

    def test_a_report_without_the_target_is_refused(self):
        done = pool("--target", "qsd", self.reports[0])
        self.assertEqual(done.returncode, 2)
        self.assertEqual(len(done.stderr.strip().splitlines()), 1)
        self.assertIn("has no target 'qsd'", done.stderr)
        self.assertEqual(done.stdout, "")

    def test_a_goal_that_is_not_a_ratio_is_refused(self):
        for bad in ("-1", "0", "abc", "nan"):
            done = pool("--goal", bad, self.reports[0])
            self.assertEqual(done.returncode, 2, bad)
            self.assertEqual(done.stderr.strip(),
                             "pool: argument --goal: '%s' is not allowed: "
                             "use a ratio above 0, e.g. 0.95" % bad)


class IntervalTest(unittest.TestCase):
    """median_interval and verdict on values whose order is known."""

    def test_six_values_give_the_extremes_five_give_none(self):
        # Binomial(6, 1/2): P(0 below) = 1/64 <= 2.5 %, P(<= 1) = 7/64 > it.
        self.assertEqual(pooling.median_interval([6, 1, 5, 2, 4, 3]), (1, 6))
        self.assertIsNone(pooling.median_interval([1, 2, 3, 4, 5]))

    def test_twenty_values_give_the_sixth_from_each_end(self):
        # Binomial(20, 1/2): P(<= 5) = 2.07 % <= 2.5 %, P(<= 6) = 5.8 %.
        values = list(range(1, 21))
        self.assertEqual(pooling.median_interval(values), (6, 15))

    def test_verdict(self):
        self.assertEqual(pooling.verdict((0.96, 1.1), 0.95), "met")
        self.assertEqual(pooling.verdict((0.95, 1.1), 0.95), "met")
        self.assertEqual(pooling.verdict((0.8, 0.94), 0.95), "not met")
        self.assertEqual(pooling.verdict((0.9, 1.0), 0.95), "not resolved")
        self.assertEqual(pooling.verdict(None, 0.95), "not resolved")

    def test_pairs_sum_each_abba_pair(self):
        run = {"rows": [
            {"job": "j", "target": "a",
             "rounds": [{"iops": 10}, {"iops": 30}, {"iops": 5}]},
            {"job": "j", "target": "b",
             "rounds": [{"iops": 20}, {"iops": 20}, {"iops": 5}]}]}
        self.assertEqual(pooling.pair_ratios(run, "a", "b", "j"), [1.0])
        self.assertEqual(pooling.round_ratios(run, "a", "b", "j"),
                         [0.5, 1.5, 1.0])
        self.assertIsNone(pooling.round_ratios(run, "a", "c", "j"))


if __name__ == "__main__":
    benchtest.need("fio")
    benchtest.main()
