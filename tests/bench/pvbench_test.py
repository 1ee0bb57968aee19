#!/usr/bin/env python3
"""bench/pvbench's pure parts, without running anything: option types,
fio command lines and reports, per-request figures, medians and ratios,
markdown; where an OSD's admin socket is found from a ceph.conf; and,
where qemu-img, fio and fincore are here, that a lab's
qcow2 image and the image it was converted from are out of the page cache
as the direct fill leaves a raw image; and that a remounting target
serves each run from a new mount."""
import argparse
import json
import os
import shutil
import subprocess
import tempfile
import unittest

import benchtest  # noqa: F401  (puts bench/ on sys.path)
from pvbench import cli, fio, lab, osd_cache, report


class OptionsTest(unittest.TestCase):
    def test_image_size(self):
        self.assertEqual(cli.image_size("64M"), 64 << 20)
        self.assertEqual(cli.image_size("1g"), 1 << 30)
        for bad in ("", "15M", "1K", "64.5M", "1X", "-1G", "1048577"):
            with self.assertRaises(argparse.ArgumentTypeError, msg=bad):
                cli.image_size(bad)

    def test_numbers(self):
        self.assertEqual(cli.positive_number("1"), 1)
        self.assertEqual(cli.positive_number("0.5"), 0.5)
        self.assertEqual(cli.positive_int("3"), 3)
        for bad in ("0", "-1", "x", "nan", "inf"):
            with self.assertRaises(argparse.ArgumentTypeError, msg=bad):
                cli.positive_number(bad)
        with self.assertRaises(argparse.ArgumentTypeError):
            cli.positive_int("1.5")

    def test_one_of(self):
        parse = cli.one_of(["a", "b", "c"])
        self.assertEqual(parse("c,a,c"), ["c", "a"])
        for bad in ("", ",", "a,d"):
            with self.assertRaises(argparse.ArgumentTypeError, msg=bad):
                parse(bad)


class FioTest(unittest.TestCase):
    def test_command(self):
        cmd = fio.command("rr", "/x/disk0.img", "rw=randread bs=4k", 2,
                          extra="numjobs=2")
        self.assertEqual(cmd[:3], ["fio", "--name=rr", "--filename=/x/disk0.img"])
        self.assertEqual(cmd[-4:], ["--runtime=2", "--rw=randread", "--bs=4k",
                                    "--numjobs=2"])
        self.assertIn("--filename=MNT", fio.shown(cmd, "/x/disk0.img", "MNT"))
        # fio reads "0.5" as 0 (and then covers the whole file): a fraction
        # goes in ms.
        self.assertIn("--runtime=500ms", fio.command("rr", "/x", "", 0.5))
        self.assertIn("--runtime=1", fio.command("rr", "/x", "", 1.0))

    def test_parse(self):
        side = {"io_bytes": 0, "iops": 0, "bw_bytes": 0, "clat_ns": {"mean": 0}}
        read = {"io_bytes": 4096, "iops": 1000.0, "bw_bytes": 2**20 * 4,
                "clat_ns": {"mean": 31000.0, "percentile": {"99.000000": 90000}}}
        text = "note: noise\n" + json.dumps({"jobs": [{"read": read, "write": side}]})
        self.assertEqual(fio.parse(text), {"iops": 1000.0, "mib_s": 4.0,
                                           "mean_us": 31.0, "p99_us": 90.0,
                                           "lat_us": None})
        # A request served inside the submitting call: clat is small, lat
        # holds the round trip.
        read["clat_ns"]["mean"] = 2000.0
        read["lat_ns"] = {"mean": 65000.0}
        text = json.dumps({"jobs": [{"read": read, "write": side}]})
        self.assertEqual(fio.parse(text)["mean_us"], 2.0)
        self.assertEqual(fio.parse(text)["lat_us"], 65.0)
        with self.assertRaises(fio.FioError):
            fio.parse("fio: no JSON")


class ReportTest(unittest.TestCase):
    def test_derive(self):
        d = report.derive({"fuse_reads": 200, "reqs_read": 100, "sectors_read": 1600,
                           "kicks_sent": 25, "irqs_sent": 50})
        self.assertEqual(d, {"ring_reqs_per_fuse": 0.5, "avg_req_kib": 8.0,
                             "kicks_per_req": 0.25, "irqs_per_req": 0.5})
        self.assertEqual(report.derive({})["avg_req_kib"], 0.0)

    def test_summarize(self):
        runs = {"a": [{"iops": 100.0, "counters": {"x": 1}}, {"iops": 300.0, "counters": {"x": 3}},
                      {"iops": 200.0, "counters": {"x": 9}}],
                "b": [{"iops": 50.0}, {"iops": 300.0}, {"iops": 100.0}]}
        rows = report.summarize(runs, ratios={"ratio": "a", "vs_c": "c"}, counters=["x"])
        self.assertEqual(rows[0]["iops"], 200.0)
        self.assertEqual(rows[0]["x"], 3)
        self.assertEqual(rows[1]["ratio"], 0.5)   # median of 0.5, 1.0, 0.5
        self.assertIsNone(rows[1]["vs_c"])        # no such base
        self.assertIsNone(rows[1]["x"])           # no counters
        self.assertEqual(report.median_counters(runs["a"]), {"x": 3})
        self.assertIsNone(report.median_counters(runs["b"]))

    def test_median_counters_of_an_even_number_of_runs(self):
        # bench/compare --rounds 2 once failed here: the median of two runs
        # averages them, and the latency histograms are lists.
        runs = [{"counters": {"reqs_read": 10, "read_latency_ns": [1, 2]}},
                {"counters": {"reqs_read": 20, "read_latency_ns": [3, 4]}}]
        merged = report.median_counters(runs)
        self.assertEqual(merged["reqs_read"], 15)
        self.assertEqual(merged["read_latency_ns"], [3, 4])
        self.assertIsNone(report.median_counters([{"iops": 1}]))

    def test_markdown(self):
        text = report.markdown([{"a": 1.234, "b": None, "c": 1234.5}], ["a", "b", "c"])
        self.assertEqual(text.splitlines(), ["| a | b | c |", "| --- | --- | --- |",
                                             "| 1.23 | - | 1234 |"])


def cached_bytes(path):
    """How many bytes of `path` the page cache holds (fincore)."""
    p = subprocess.run(["fincore", "--bytes", "--noheadings", "--raw",
                        "--output", "RES", path],
                       text=True, capture_output=True, check=True)
    return int(p.stdout.split()[0])


class OsdSocketsTest(unittest.TestCase):
    """The OSDs' admin sockets from a ceph.conf's `admin socket` pattern
    (as scripts/ceph-cluster.sh writes it) or its `run dir`: only osd.N's,
    whatever the $pid."""

    def test_admin_socket_pattern_and_run_dir(self):
        with tempfile.TemporaryDirectory() as d:
            run = os.path.join(d, "run")
            os.makedirs(run)
            for name in ("ceph-osd.0.4242.asok", "ceph-osd.1.77.asok",
                         "ceph-mon.a.4141.asok", "ceph-client.admin.9.asok"):
                open(os.path.join(run, name), "w").close()
            conf = os.path.join(d, "ceph.conf")
            with open(conf, "w") as f:
                f.write("[global]\nrun dir = %s\n# admin socket = /x\n"
                        "admin_socket = %s/$cluster-$name.$pid.asok\n"
                        "[mon]\nadmin socket = /elsewhere\n" % (run, run))
            self.assertEqual(osd_cache.osd_sockets(conf),
                             [os.path.join(run, "ceph-osd.0.4242.asok"),
                              os.path.join(run, "ceph-osd.1.77.asok")])
            self.assertEqual(osd_cache.conf_value(conf, "run-dir"), run)
            with open(conf, "w") as f:
                f.write("[global]\nrun dir = %s\n" % run)
            self.assertEqual(osd_cache.osd_sockets(conf), [])  # no $pid
            os.rename(os.path.join(run, "ceph-osd.1.77.asok"),
                      os.path.join(run, "ceph-osd.1.asok"))
            self.assertEqual(osd_cache.osd_sockets(conf),
                             [os.path.join(run, "ceph-osd.1.asok")])


@unittest.skipUnless(all(shutil.which(t) for t in ("qemu-img", "fio", "fincore"))
                     and os.access(os.path.join(benchtest.build_dir(), "pvdisk"),
                                   os.X_OK),
                     "needs qemu-img, fio, fincore and a built pvdisk")
class LabQcow2Test(unittest.TestCase):
    def test_converted_image_leaves_the_page_cache(self):
        # qemu-img convert reads the image and writes the qcow2 through the
        # page cache; the targets serve both with O_DIRECT.
        with lab.Lab(benchtest.build_dir(), 16 << 20) as the_lab:
            the_lab.fill()
            image = the_lab.qcow2("disk0.qcow2")
            self.assertGreater(os.path.getsize(image), 16 << 20)
            self.assertEqual(cached_bytes(image), 0)
            self.assertEqual(cached_bytes(the_lab.image), 0)


@unittest.skipUnless(os.access(os.path.join(benchtest.build_dir(), "pvdisk"),
                               os.X_OK) and os.path.exists("/dev/fuse"),
                     "needs /dev/fuse and a built pvdisk")
class RemountingTest(unittest.TestCase):
    def test_each_reset_serves_the_image_from_a_new_mount(self):
        with lab.Lab(benchtest.build_dir(), 16 << 20) as the_lab:
            target = lab.Remounting(the_lab, lambda: the_lab.mount([]))
            daemons = [target.pid]
            for _ in range(2):
                old_mount = os.path.dirname(target.file)
                target.reset()
                self.assertNotIn(old_mount, lab.mounts())
                self.assertIn(os.path.dirname(target.file), lab.mounts())
                daemons.append(target.pid)
                with open(target.file, "rb") as f:
                    self.assertEqual(len(f.read(4096)), 4096)
                self.assertIsNotNone(target.counters())
            self.assertEqual(len(set(daemons)), 3)
            self.assertEqual(len(the_lab.targets), 1)
            mount = os.path.dirname(target.file)
        self.assertNotIn(mount, lab.mounts())


if __name__ == "__main__":
    benchtest.main()
