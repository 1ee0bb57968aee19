"""Shared by the tests of bench/: where the tools are, skipping (exit 77,
ctest's SKIP_RETURN_CODE) when this machine cannot run them, and a scratch
folder that a tool runs in (its TMPDIR) and that must end with nothing
mounted below it and no temp folder left."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
BENCH = os.path.join(REPO, "bench")
sys.path.insert(0, BENCH)
from pvbench import lab  # noqa: E402

SKIP = 77


def build_dir():
    """The build directory (argv[1], from CMake), holding pvdisk."""
    return os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(REPO, "build"))


def need(*tools, fuse=True):
    """Exits 77 with the reason unless pvdisk, /dev/fuse and the tools are
    here."""
    why = []
    if not os.access(os.path.join(build_dir(), "pvdisk"), os.X_OK):
        why.append("pvdisk not built in %s" % build_dir())
    if fuse and not os.access("/dev/fuse", os.R_OK | os.W_OK):
        why.append("/dev/fuse not usable")
    why += ["%s not found" % t for t in tools if not shutil.which(t)]
    if why:
        print("SKIP: " + "; ".join(why))
        sys.exit(SKIP)


class Scratch:
    """A scratch folder: out/ for results, tmp/ as the tool's TMPDIR."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="bench-test.")
        self.out = os.path.join(self.dir, "out")
        self.tmp = os.path.join(self.dir, "tmp")
        os.makedirs(self.tmp)

    def env(self, **extra):
        env = dict(os.environ, TMPDIR=self.tmp)
        env.update(extra)
        return env

    def command(self, tool, *args):
        return [sys.executable, os.path.join(BENCH, tool),
                "--build", build_dir()] + list(args)

    def run(self, tool, *args, timeout=200, env=None):
        """Runs bench/TOOL with --build and these options."""
        return subprocess.run(self.command(tool, *args), text=True,
                              capture_output=True, timeout=timeout,
                              env=env or self.env())

    def check_clean(self, test):
        """Nothing mounted below the folder; the tool's temp dir is gone."""
        test.assertEqual(lab.mounted_under(self.dir), [])
        test.assertEqual(os.listdir(self.tmp), [])

    def close(self):
        for m in lab.mounted_under(self.dir):  # only after a failed test
            lab.force_unmount(m)
        shutil.rmtree(self.dir, ignore_errors=True)


class OneRun(unittest.TestCase):
    """Tests of one run of a bench tool, made once for the class in a
    Scratch: a subclass's start(scratch) runs the tool and returns its
    CompletedProcess (self.result); every such class checks that the run
    ended with status 0 and left nothing mounted and no temp folder, plus
    what its left_behind() names."""

    @classmethod
    def start(cls, scratch):
        raise NotImplementedError("a OneRun subclass runs its tool here")

    @classmethod
    def setUpClass(cls):
        cls.scratch = Scratch()
        try:
            cls.result = cls.start(cls.scratch)
        except BaseException:
            cls.scratch.close()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.scratch.close()

    def left_behind(self):
        """What else the run must not leave behind (a subclass's list)."""
        return []

    def test_finishes_and_cleans_up(self):
        self.assertEqual(self.result.returncode, 0, self.result.stderr)
        self.scratch.check_clean(self)
        self.assertEqual(self.left_behind(), [])


def main():
    """unittest.main without reading the build-dir argument as a test name."""
    unittest.main(argv=sys.argv[:1], verbosity=2)
