#!/usr/bin/env python3
"""`make run` past its build: scripts/demo.sh (what `make run` runs once
pvdisk is built) against this build's pvdisk, in a temporary folder that
stands for the build folder (the demo keeps its image and mount in
BUILD/demo). It must finish with status 0, show every stage it announces,
and leave nothing mounted.

Usage: demo_test.py PVDISK_DIR"""
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import docslib  # noqa: E402


class DemoTest(unittest.TestCase):

    def test_make_runs_demo_finishes_and_cleans_up(self):
        why = docslib.missing(fuse=True, tools=["fio"])
        if why:
            self.skipTest(why)
        scratch = docslib.Scratch(prefix="docs-demo.")
        try:
            os.symlink(docslib.pvdisk(), os.path.join(scratch.dir, "pvdisk"))
            out = subprocess.run(
                [os.path.join(docslib.REPO, "scripts", "demo.sh"), scratch.dir],
                capture_output=True, text=True, timeout=120)
        finally:
            leftovers = scratch.close()
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        for stage in ["== pvdisk mount", "== fio", "== pvdisk list",
                      "== pvdisk unmount", "pvdisk: unmounted"]:
            self.assertIn(stage, out.stdout)
        self.assertEqual(leftovers, [], "the demo left mounts behind")


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
