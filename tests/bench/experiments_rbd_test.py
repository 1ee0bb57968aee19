#!/usr/bin/env python3
"""bench/experiments --device rbd end to end, briefly: its own one-node Ceph
cluster, a 32 MiB RBD image filled through pvdisk, request-size at 1 s per
run. The report names the RBD device; the counters show the slow-device
shape (small requests fill the 32-slot ring, 1 MiB ones do not); nothing
stays mounted or running."""
import json
import os

import benchtest
from compare_rbd_test import ceph_daemons_under


class ExperimentsRbdTest(benchtest.OneRun):
    @classmethod
    def start(cls, scratch):
        return scratch.run("experiments", "--device", "rbd",
                           "--only", "request-size", "--runtime", "1",
                           "--image-size", "32M", "--out", scratch.out,
                           timeout=220)

    def left_behind(self):
        return ceph_daemons_under(self.scratch.dir)

    def test_report_names_the_rbd_device(self):
        with open(os.path.join(self.scratch.out, "request-size.md")) as f:
            md = f.read()
        self.assertIn("device `rbd`, --disk `rbd:rbd/experiments-", md)
        with open(os.path.join(self.scratch.out, "experiments.md")) as f:
            self.assertIn("Device: rbd. Image: 32 MiB of random data", f.read())

    def test_counters_follow_the_request_size(self):
        with open(os.path.join(self.scratch.out, "request-size.json")) as f:
            rows = json.load(f)["tables"][0]["rows"]
        self.assertEqual([r["config"] for r in rows],
                         ["max-segments %d" % s for s in (11, 16, 32, 64, 128, 256)])
        for row in rows:
            self.assertGreater(row["iops"], 0, row["config"])
        self.assertLessEqual(rows[0]["avg_req_kib"], 44)
        self.assertEqual(rows[0]["inflight_max"], 32)  # the ring is the limit
        self.assertEqual(rows[-1]["avg_req_kib"], 1024)
        self.assertLessEqual(rows[-1]["inflight_max"], 4)  # fio's 4 reads


if __name__ == "__main__":
    benchtest.need("fio", "gnuplot", "rbd", "ceph-mon", "ceph-osd")
    benchtest.main()
