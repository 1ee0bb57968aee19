#!/usr/bin/env python3
"""bench/compare and bench/experiments when things go wrong: a bad option,
a missing qemu-storage-daemon, flags pvdisk refuses -- one line, exit 2,
nothing mounted, nothing written; an interrupt mid-run -- exit 130 and
everything unmounted and removed."""
import os
import signal
import subprocess
import time
import unittest

import benchtest

BAD = [
    ("compare", ["--runtime", "0"], "--runtime"),
    ("compare", ["--runtime", "fast"], "--runtime"),
    ("compare", ["--rounds", "0"], "--rounds"),
    ("compare", ["--image-size", "5x"], "--image-size"),
    ("compare", ["--image-size", "1K"], "--image-size"),
    ("compare", ["--targets", "native,vmware"], "vmware"),
    ("compare", ["--jobs", "rr4k_qd64"], "rr4k_qd64"),
    ("compare", ["--pvdisk-flags", "'unclosed"], "--pvdisk-flags"),
    ("compare", ["--no-such-option"], "--no-such-option"),
    ("compare", ["--build", "/nonexistent"], "make build"),
    ("compare", ["--base-build", "/nonexistent"], "build-pvdisk"),
    ("compare", ["--targets", "native,pvdisk-base"], "without --base-build"),
    ("compare", ["--base-build", "BUILD", "--targets", "native,pvdisk"],
     "leaves out pvdisk-base"),
    ("compare", ["--rbd", "--targets", "pvdisk,pvdisk-base"],
     "without --base-build"),
    ("compare", ["--warmup", "-1"], "--warmup"),
    ("compare", ["--warmup", "2", "--group", "latency"], "--warmup"),
    ("compare", ["--pvdisk-flags=--queues 0", "--image-size", "16M"], "--queues"),
    ("experiments", ["--only", "queues,latency"], "latency"),
    ("experiments", ["--runtime", "-1"], "--runtime"),
    ("experiments", ["--rounds", "two"], "--rounds"),
    ("experiments", ["--image-size", "100K"], "--image-size"),
    ("experiments", ["--build", "/nonexistent"], "make build"),
    ("experiments", ["--device", "remote"], "--device"),
    ("experiments", ["--device", "null-delay", "--only", "dispatch"], "dispatch"),
    ("experiments", ["--device", "null-delay", "--disk", "IMAGE"], "--disk"),
    ("experiments", ["--disk", "IMAGE", "--only", "notifications"],
     "notifications"),
]


class FailuresTest(unittest.TestCase):
    def setUp(self):
        self.scratch = benchtest.Scratch()

    def tearDown(self):
        self.scratch.close()

    def assert_refused(self, result, tool, words):
        """Exit 2, one line on stderr naming the problem, no output, nothing
        mounted, nothing written."""
        self.assertEqual(result.returncode, 2, result.stderr)
        lines = result.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, result.stderr)
        self.assertTrue(lines[0].startswith(tool + ": "), lines[0])
        self.assertIn(words, lines[0])
        self.assertEqual(result.stdout, "")
        self.assertFalse(os.path.exists(self.scratch.out))
        self.scratch.check_clean(self)

    def test_bad_options(self):
        for tool, args, words in BAD:
            # BUILD: a real build directory (a base build that exists).
            args = [benchtest.build_dir() if a == "BUILD" else a for a in args]
            with self.subTest(tool=tool, args=args):
                result = self.scratch.run(tool, *args, "--out", self.scratch.out)
                self.assert_refused(result, tool, words)

    def test_missing_qsd(self):
        """With only fio on PATH, compare refuses to start the qsd target."""
        bin_dir = os.path.join(self.scratch.dir, "bin")
        os.makedirs(bin_dir)
        os.symlink(subprocess.run(["which", "fio"], capture_output=True,
                                  text=True).stdout.strip(),
                   os.path.join(bin_dir, "fio"))
        result = self.scratch.run("compare", "--out", self.scratch.out,
                                  env=self.scratch.env(PATH=bin_dir))
        self.assert_refused(result, "compare", "qemu-storage-daemon not found")

    def test_base_build_that_refuses_the_flags(self):
        """A base build whose pvdisk refuses the mount (as an older build
        refuses a flag it does not know): one line naming the base build,
        exit 2, the pvdisk mount made before it taken down."""
        base = os.path.join(self.scratch.dir, "old")
        os.makedirs(base)
        program = os.path.join(base, "pvdisk")
        with open(program, "w") as f:
            f.write("#!/bin/sh\necho 'pvdisk: unknown flag --fuse-spread' >&2\n"
                    "exit 2\n")
        os.chmod(program, 0o755)
        result = self.scratch.run(
            "compare", "--base-build", base, "--image-size", "16M",
            "--targets", "native,pvdisk,pvdisk-base", "--jobs", "rr4k_qd1",
            "--pvdisk-flags=--fuse-spread on", "--out", self.scratch.out)
        self.assert_refused(result, "compare",
                            "pvdisk-base (--base-build %s)" % base)
        self.assertIn("unknown flag --fuse-spread", result.stderr)

    def test_interrupt_cleans_up(self):
        """SIGINT during the first fio run: exit 130, everything unmounted,
        qemu-storage-daemon and fuse_floor stopped, the temp dir removed."""
        p = subprocess.Popen(self.scratch.command(
            "compare", "--runtime", "5", "--rounds", "1", "--image-size", "32M",
            "--jobs", "rr4k_qd1", "--out", self.scratch.out),
            env=self.scratch.env(), stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not self.targets_up():
            time.sleep(0.1)
        self.assertTrue(self.targets_up(), "compare never mounted its targets")
        time.sleep(1.5)  # into the runs
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 130, err)
        self.assertIn("compare: interrupted", err)
        self.scratch.check_clean(self)

    def targets_up(self):
        """pvdisk, pvdisk-thread, pvdisk-classic, null, null-uring, qsd,
        floor, floor-uring and floor-disk are all mounted in the tool's temp
        dir."""
        return len(benchtest.lab.mounted_under(self.scratch.tmp)) == 9


if __name__ == "__main__":
    benchtest.need("fio")
    benchtest.main()
