#!/usr/bin/env python3
"""bench/experiments, briefly: notifications, request-size and
notifications-across-protocols (at iodepth 4 only) at 0.2 s per run on a
16 MiB image. Every table has every column (markdown and JSON), the PNGs
are PNGs, and nothing stays mounted."""
import json
import os

import benchtest
from pvbench import report

HEAD = ["config", "iops", "mib_s", "mean_us", "p99_us", "ratio"]
COLUMNS = {
    "notifications": HEAD + ["kicks_per_req", "irqs_per_req", "kicks_suppressed",
                             "irqs_suppressed", "final_check_again"],
    "request-size": HEAD + ["avg_req_kib", "reqs_read", "sectors_read", "splits",
                            "indirect_reqs"],
    "notifications-across-protocols": HEAD + [
        "kicks_per_req", "irqs_per_req", "kicks_suppressed", "irqs_suppressed",
        "irqs_coalesced", "final_check_again"],
}
FRONTENDS = ["blkif", "virtio", "virtio-packed", "nvme"]
ROWS = {"notifications": [["event-idx", "always"]] * 2,
        "request-size": [["max-segments %d" % s for s in (11, 16, 32, 64, 128, 256)]],
        "notifications-across-protocols": [
            ["qd 4, %s, %s" % (f, n) for f in FRONTENDS
             for n in ("always", "event-idx")]
            + ["qd 4, nvme, event-idx, coalesce 8,100"]]}


class ExperimentsTest(benchtest.OneRun):
    @classmethod
    def start(cls, scratch):
        return scratch.run("experiments", "--only",
                           "notifications,request-size,"
                           "notifications-across-protocols", "--depths", "4",
                           "--runtime", "0.2", "--image-size", "16M",
                           "--out", scratch.out)

    def load(self, name):
        with open(os.path.join(self.scratch.out, name + ".json")) as f:
            return json.load(f)

    def test_tables_have_every_column(self):
        for name, columns in COLUMNS.items():
            header = "| " + " | ".join(columns) + " |"
            with open(os.path.join(self.scratch.out, name + ".md")) as f:
                md = f.read()
            self.assertEqual(md.count(header), len(ROWS[name]), name)
            self.assertEqual(self.result.stdout.count(header), len(ROWS[name]), name)
            self.assertIn("fio: `fio ", md)
            data = self.load(name)
            self.assertEqual([[r["config"] for r in t["rows"]] for t in data["tables"]],
                             ROWS[name])
            for table in data["tables"]:
                self.assertEqual(table["columns"], columns)
                for row in table["rows"]:
                    for c in columns[1:]:
                        self.assertIsInstance(row[c], (int, float), (name, row["config"], c))
        self.assertTrue(os.path.exists(os.path.join(self.scratch.out, "experiments.md")))

    def test_request_size_follows_max_segments(self):
        rows = self.load("request-size")["tables"][0]["rows"]
        self.assertLessEqual(rows[0]["avg_req_kib"], 44)  # 11 segments
        self.assertEqual(rows[-1]["avg_req_kib"], 1024)   # 256: one per 1 MiB read
        self.assertEqual(rows[-1]["splits"], 0)

    def test_suppression_takes_kicks_below_one_per_request(self):
        # At iodepth 4 every protocol's event index (nvme: the shadow
        # doorbell's EventIdx) lets the driver skip most kicks; without it,
        # every publish kicks.
        rows = {r["config"]: r for r in
                self.load("notifications-across-protocols")["tables"][0]["rows"]}
        for frontend in FRONTENDS:
            always = rows["qd 4, %s, always" % frontend]
            suppressed = rows["qd 4, %s, event-idx" % frontend]
            self.assertEqual(always["kicks_suppressed"], 0, frontend)
            self.assertLess(suppressed["kicks_per_req"], 1, frontend)
            self.assertGreater(suppressed["kicks_suppressed"], 0, frontend)
        coalesced = rows["qd 4, nvme, event-idx, coalesce 8,100"]
        self.assertLessEqual(coalesced["irqs_coalesced"],
                             coalesced["irqs_suppressed"])

    def test_png(self):
        for name in ("request-size", "notifications-across-protocols"):
            png = os.path.join(self.scratch.out, name + ".png")
            self.assertTrue(report.is_png(png), png)
            self.assertEqual(self.load(name)["png"], png)


class NullDelayTest(benchtest.OneRun):
    """--device null-delay, request-size at 0.2 s per run: the slow-device
    shape (one blkif ring of 32) on the null engine with its delay, the
    device and the load in the report, and the counters that explain the
    table: small requests fill the ring, large ones do not need to."""

    @classmethod
    def start(cls, scratch):
        return scratch.run("experiments", "--device", "null-delay",
                           "--only", "request-size", "--runtime", "0.2",
                           "--image-size", "16M", "--out", scratch.out)

    def test_report_names_the_device_and_the_load(self):
        with open(os.path.join(self.scratch.out, "request-size.md")) as f:
            md = f.read()
        self.assertIn("device `null-delay`, --disk `IMAGE,delay=20000`, "
                      "flags `--engine null`", md)
        self.assertIn("Load average (1 min) before / after: ", md)
        self.assertIn("--ring-size 32 --max-segments 11", md)

    def test_counters_explain_the_table(self):
        with open(os.path.join(self.scratch.out, "request-size.json")) as f:
            rows = json.load(f)["tables"][0]["rows"]
        self.assertEqual([r["config"] for r in rows],
                         ["max-segments %d" % s for s in (11, 16, 32, 64, 128, 256)])
        self.assertLessEqual(rows[0]["avg_req_kib"], 44)
        self.assertEqual(rows[0]["inflight_max"], 32)  # the ring is the limit
        self.assertGreater(rows[0]["ring_full"], 0)
        self.assertEqual(rows[-1]["avg_req_kib"], 1024)
        self.assertLessEqual(rows[-1]["inflight_max"], 4)  # fio's 4 reads
        self.assertEqual(rows[-1]["ring_full"], 0)
        for row in rows:
            self.assertGreaterEqual(row["lat_us_p50"], 20000, row["config"])


if __name__ == "__main__":
    benchtest.need("fio", "gnuplot")
    benchtest.main()
