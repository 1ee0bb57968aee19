#!/usr/bin/env python3
"""pvdisk trace on a real mount driven by fio:

  blktrace   a random-read job: blkparse -i parses the files without an
             error, the Q count is fio's I/O count, no event was lost, and
             btt's mean Q2C is within 20% of the mean FUSE-to-reply read
             latency stats.json shows for the same interval
  merges     a sequential write job on one small ring: Q count is fio's,
             and the M/F count equals the stats' merges_read + merges_write
             for the interval (and is not 0)
  perfetto   --format perfetto: the JSON loads, every event has ph, ts,
             pid and tid, each request's events are in time order, there
             is one request slice per fio I/O, and bench/trace_plot draws
             a PNG of it
  bad_input  a mount or disk that does not exist, an output folder that
             cannot be written, a second trace of a traced disk: one line,
             non-zero exit, nothing written

Usage: trace_test.py BUILD_DIR TEST"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.realpath(__file__))))
sys.path.insert(0, os.path.join(REPO, "bench"))
from pvbench import lab, report  # noqa: E402

SKIP = 77
BUILD = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(
    REPO, "build")
PVDISK = os.path.join(BUILD, "pvdisk")
STAGES = {"FUSE wait", "staging", "ring", "backend take", "engine",
          "completion", "reply"}


def need(*tools):
    why = []
    if not os.access(PVDISK, os.X_OK):
        why.append("pvdisk not built in %s" % BUILD)
    if not os.access("/dev/fuse", os.R_OK | os.W_OK):
        why.append("/dev/fuse not usable")
    why += ["%s not found" % t for t in tools if not shutil.which(t)]
    if why:
        print("SKIP: " + "; ".join(why))
        sys.exit(SKIP)


class Mounted(unittest.TestCase):
    """A scratch folder with a 256 MiB image mounted with MOUNT_FLAGS, and
    out/ for the traces. Nothing stays mounted or on disk afterwards."""
    MOUNT_FLAGS = []

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="trace-test.")
        self.out = os.path.join(self.dir, "out")
        self.mnt = os.path.join(self.dir, "mnt")
        os.makedirs(self.out)
        os.makedirs(self.mnt)
        image = os.path.join(self.dir, "disk0.img")
        subprocess.run([PVDISK, "create", image, "--size", "256M"],
                       check=True, capture_output=True)
        subprocess.run([PVDISK, "mount", self.mnt, "--disk", image]
                       + self.MOUNT_FLAGS, check=True, capture_output=True)
        self.disk = os.path.join(self.mnt, "disk0.img")

    def tearDown(self):
        subprocess.run([PVDISK, "unmount", self.mnt], capture_output=True,
                       timeout=120)
        for m in lab.mounted_under(self.dir):
            lab.force_unmount(m)
        self.assertEqual(lab.mounted_under(self.dir), [])
        shutil.rmtree(self.dir, ignore_errors=True)

    def total(self):
        with open(os.path.join(self.mnt, "stats.json")) as f:
            return json.load(f)["disks"][0]["total"]

    def start_trace(self, *flags):
        """pvdisk trace, once it says it records."""
        trace = subprocess.Popen([PVDISK, "trace", self.mnt, "-o", self.out]
                                 + list(flags), text=True,
                                 stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE)
        line = trace.stderr.readline()
        if not line.startswith("pvdisk trace: recording"):
            trace.kill()
            trace.communicate()
            self.fail("pvdisk trace did not start: " + line)
        return trace

    def stop_trace(self, trace):
        trace.send_signal(signal.SIGINT)
        out, err = trace.communicate(timeout=60)
        self.assertEqual(trace.returncode, 0, err)
        self.assertIn(" 0 events lost", out)
        return out

    def fio(self, *job):
        """Runs fio on the disk; returns its I/O count (reads + writes)."""
        p = subprocess.run(
            ["fio", "--name=trace", "--filename=" + self.disk,
             "--ioengine=io_uring", "--direct=1", "--bs=4k",
             "--output-format=json"] + list(job),
            text=True, capture_output=True, timeout=90)
        self.assertEqual(p.returncode, 0, p.stderr)
        result = json.loads(p.stdout[p.stdout.index("{"):])["jobs"][0]
        return result["read"]["total_ios"] + result["write"]["total_ios"]

    def perfetto_trace(self):
        """Traces fio's random 4 KiB I/O in the perfetto format; checks that
        every I/O is one request whose steps, backend's included, are in
        order; returns the trace's path."""
        trace = self.start_trace("--format", "perfetto")
        ios = self.fio("--rw=randrw", "--iodepth=16", "--size=64M",
                       "--io_size=4M")
        self.stop_trace(trace)
        path = os.path.join(self.out, "disk0.img.perfetto.json")
        with open(path) as f:
            doc = json.load(f)
        self.assertEqual(doc["otherData"]["lost_events"], "0")
        events = doc["traceEvents"]
        by_request = {}
        outer = 0
        for e in events:
            for key in ("ph", "ts", "pid", "tid"):
                self.assertIn(key, e)
            if e["ph"] in ("b", "e"):
                by_request.setdefault((e["pid"], e["id"]), []).append(e)
                outer += e["ph"] == "b" and e["name"] not in STAGES
        self.assertEqual(outer, ios)
        for request in by_request.values():
            times = [e["ts"] for e in request]
            self.assertEqual(times, sorted(times), request)
            names = {e["name"] for e in request}
            self.assertTrue({"staging", "backend take", "engine",
                             "completion", "reply"} <= names, names)
        self.assertTrue(any(e["ph"] == "i" for e in events))
        return path

    def blkparse_actions(self):
        """The action letter of every event blkparse prints."""
        p = subprocess.run(["blkparse", "-i", "disk0.img", "-D", self.out],
                           cwd=self.out, text=True, capture_output=True,
                           timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stderr.strip(), "")
        actions = []
        for line in p.stdout.splitlines():
            fields = line.split()
            if len(fields) > 6 and fields[0].startswith("240,"):
                actions.append(fields[5])
        return actions, p.stdout


class BlktraceTest(Mounted):

    def test_blkparse_and_btt_read_it(self):
        need("fio", "blkparse", "btt")
        trace = self.start_trace()
        before = self.total()
        # Depth 8: btt's C is when the response is consumed, the stats'
        # latency ends at the reply; the replies of a batch of responses go
        # out one after another, so a deep batch on a loaded machine (the
        # thread preempted mid-batch) widens the gap between the two.
        ios = self.fio("--rw=randread", "--iodepth=8", "--size=128M",
                       "--io_size=16M")
        after = self.total()
        summary = self.stop_trace(trace)
        self.assertEqual(ios, 4096)
        self.assertIn("%d queued (Q)" % ios, summary)

        actions, text = self.blkparse_actions()
        self.assertEqual(actions.count("Q"), ios)
        self.assertEqual(actions.count("C"), ios)  # nothing merges here
        self.assertIn("pvdisk: lost 0 events", text)

        dump = os.path.join(self.dir, "dump.bin")
        subprocess.run(["blkparse", "-q", "-i", "disk0.img", "-D", self.out,
                        "-d", dump, "-o", "/dev/null"], check=True,
                       capture_output=True, timeout=60)
        p = subprocess.run(["btt", "-i", dump], text=True,
                           capture_output=True, timeout=60, cwd=self.dir)
        self.assertEqual(p.returncode, 0, p.stderr)
        q2c = [line.split() for line in p.stdout.splitlines()
               if line.startswith("Q2C")][0]
        self.assertEqual(int(q2c[4]), ios)
        q2c_ns = float(q2c[2]) * 1e9
        reads = after["reads_done"] - before["reads_done"]
        self.assertEqual(reads, ios)
        stats_ns = (after["read_lat_ns"] - before["read_lat_ns"]) / reads
        print("btt Q2C mean %.0f ns, stats read latency mean %.0f ns"
              % (q2c_ns, stats_ns))
        self.assertLess(abs(q2c_ns - stats_ns), 0.2 * stats_ns,
                        "btt Q2C %.0f ns, stats %.0f ns" % (q2c_ns, stats_ns))


class MergesTest(Mounted):
    # One queue with a small ring, so that sequential writes wait in the
    # staging queue and merge there (tests/fuse/merge_test.cc).
    MOUNT_FLAGS = ["--queues", "1", "--ring-size", "32", "--engine", "sync"]

    def test_merge_count_is_the_stats(self):
        need("fio", "blkparse")
        trace = self.start_trace()
        before = self.total()
        ios = self.fio("--rw=write", "--iodepth=64", "--size=8M")
        after = self.total()
        self.stop_trace(trace)
        merges = sum(after[k] - before[k]
                     for k in ("merges_read", "merges_write"))
        actions, _ = self.blkparse_actions()
        self.assertEqual(actions.count("Q"), ios)
        self.assertGreater(merges, 0)
        self.assertEqual(actions.count("M") + actions.count("F"), merges)
        # Every piece either merged or became a request of its own.
        self.assertEqual(actions.count("G") + merges, ios)


class PerfettoTest(Mounted):

    def test_json_and_png(self):
        need("fio", "gnuplot")
        path = self.perfetto_trace()
        png = os.path.join(self.dir, "trace.png")
        p = subprocess.run([os.path.join(REPO, "bench", "trace_plot"), path,
                            "-o", png], text=True, capture_output=True,
                           timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(report.is_png(png))


class NvmeTraceTest(Mounted):
    """nvme's device side knows a request by its command id: the backend's
    steps (take, engine, completion) must still join the request's."""
    MOUNT_FLAGS = ["--frontend", "nvme"]

    def test_backend_steps_join_their_requests(self):
        need("fio")
        self.perfetto_trace()


class BadInputTest(Mounted):

    def refused(self, args, out=None):
        """pvdisk trace ARGS fails with one line and writes nothing."""
        out = out or self.out
        p = subprocess.run([PVDISK, "trace"] + args, text=True,
                           capture_output=True, timeout=60)
        self.assertNotEqual(p.returncode, 0)
        self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
        self.assertEqual(p.stdout, "")
        self.assertEqual(os.listdir(self.out), [])
        return p.stderr

    def test_refusals(self):
        missing = os.path.join(self.dir, "no-such-mount")
        self.assertIn(missing, self.refused([missing, "-o", self.out]))
        self.refused([self.dir, "-o", self.out])  # not a mount
        self.assertIn("no disk named 'other.img'", self.refused(
            [self.mnt, "--disk", "other.img", "-o", self.out]))
        self.assertIn("not an existing folder", self.refused(
            [self.mnt, "-o", os.path.join(self.dir, "no-such-folder")]))
        self.assertIn("not an existing folder", self.refused(
            [self.mnt, "-o", os.path.join(self.dir, "disk0.img")]))
        if os.geteuid() == 0:
            # Root may write anywhere it has permission bits for; /proc
            # takes no new file whatever they say.
            self.refused([self.mnt, "-o", "/proc"])
        else:
            locked = os.path.join(self.dir, "locked")
            os.makedirs(locked, mode=0o500)
            self.assertIn("cannot write", self.refused(
                [self.mnt, "-o", locked]))
        self.refused([self.mnt, "-o", self.out, "--format", "json"])
        self.refused([self.mnt, "-o", self.out, "--seconds", "0"])
        self.refused([self.mnt])  # no -o

        # One tracer per disk: a second is refused and writes nothing.
        trace = self.start_trace()
        other = os.path.join(self.dir, "other")
        os.makedirs(other)
        p = subprocess.run([PVDISK, "trace", self.mnt, "-o", other],
                           text=True, capture_output=True, timeout=60)
        self.assertEqual(p.returncode, 2)
        self.assertIn("traced already", p.stderr)
        self.assertEqual(os.listdir(other), [])
        self.stop_trace(trace)


def main():
    need()
    which = sys.argv[2] if len(sys.argv) > 2 else None
    classes = {"blktrace": BlktraceTest, "merges": MergesTest,
               "perfetto": PerfettoTest, "nvme": NvmeTraceTest,
               "bad_input": BadInputTest}
    if which not in classes:
        print("usage: trace_test.py BUILD_DIR {%s}" % ",".join(classes))
        return 2
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(classes[which])
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
