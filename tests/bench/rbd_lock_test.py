#!/usr/bin/env python3
"""bench/pvbench's cleanup after an `rbd bench` that died holding the
image: on a one-node cluster of its own, an `rbd bench` killed mid-write
leaves its watch (and the image's exclusive lock) behind; release_watchers
blocklists it, the watch is gone at once, and the next writer does not wait
for the OSD's ~30 s watch timeout."""
import os
import signal
import subprocess
import time
import unittest

import benchtest
from benchtest import lab
from compare_rbd_test import ceph_daemons_under

SCRIPT = os.path.join(benchtest.REPO, "scripts", "ceph-cluster.sh")
IMAGE = "lock-test"


def rbd(conf, *args, timeout=60):
    return subprocess.run(["rbd", "-c", conf] + list(args), text=True,
                          capture_output=True, timeout=timeout)


def bench_write(conf, total):
    return ["rbd", "-c", conf, "--rbd-cache=false", "bench", "--io-type",
            "write", "--io-size", "64K", "--io-threads", "4", "--io-total",
            total, "rbd/" + IMAGE]


class RbdLockTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # Class cleanups run even when set-up fails half way.
        cls.scratch = benchtest.Scratch()
        cls.addClassCleanup(cls.scratch.close)
        cls.cluster = lab.CephCluster(SCRIPT, os.path.join(cls.scratch.dir,
                                                           "ceph"))
        cls.addClassCleanup(cls.cluster.close)
        cls.conf = cls.cluster.conf
        p = rbd(cls.conf, "create", "rbd/" + IMAGE, "--size", "64M")
        if p.returncode != 0:
            raise RuntimeError("rbd create failed: %s" % p.stderr)

    def test_a_killed_bench_does_not_hold_the_next_writer(self):
        before = lab.rbd_watchers(self.conf, IMAGE)
        self.assertEqual(before, set())
        killed = subprocess.Popen(bench_write(self.conf, "1T"),
                                  stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        self.assertTrue(lab.wait_until(
            lambda: lab.rbd_watchers(self.conf, IMAGE), 30),
            "rbd bench never opened the image")
        time.sleep(1)  # writing, so it holds the exclusive lock
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=30)
        left = lab.rbd_watchers(self.conf, IMAGE)
        self.assertEqual(len(left), 1, "a killed client leaves its watch")

        started = time.monotonic()
        lab.release_watchers(self.conf, IMAGE, before)
        self.assertEqual(lab.rbd_watchers(self.conf, IMAGE), set())
        p = subprocess.run(bench_write(self.conf, "4M"), text=True,
                           capture_output=True, timeout=60)
        took = time.monotonic() - started
        self.assertEqual(p.returncode, 0, p.stderr)
        # Without the release the write waits for the watch timeout (~30 s).
        self.assertLess(took, 15, "the next writer waited %.1f s" % took)

    def test_zz_cluster_stops(self):
        self.cluster.close()
        self.assertEqual(ceph_daemons_under(self.scratch.dir), [])


if __name__ == "__main__":
    benchtest.need("rbd", "ceph", "ceph-mon", "ceph-osd", fuse=False)
    benchtest.main()
