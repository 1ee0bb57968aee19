#!/usr/bin/env python3
"""`make run` past its build: scripts/demo.sh (what `make run` runs once
pvdisk is built) against this build's pvdisk, in a temporary folder that
stands for the build folder (the demo keeps its image and mount in
BUILD/demo). It must finish with status 0, show every stage it announces,
and leave nothing mounted.

The demo runs `pvdisk list`, which reads every pvdisk mount on the machine,
so a mount whose daemon does not answer (ListCommandTest's stopped daemon)
would hold it up: ctest does not run the two at once (RESOURCE_LOCK
stopped_daemon).

Usage: demo_test.py PVDISK_DIR"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import docslib  # noqa: E402

DEMO_TIMEOUT = 100


class DemoTest(unittest.TestCase):

    def test_make_runs_demo_finishes_and_cleans_up(self):
        why = docslib.missing(fuse=True, tools=["fio"])
        if why:
            self.skipTest(why)
        scratch = docslib.Scratch(prefix="docs-demo.")
        os.symlink(docslib.pvdisk(), os.path.join(scratch.dir, "pvdisk"))
        try:
            returncode, output, timed_out = docslib.run_in_own_group(
                [os.path.join(docslib.REPO, "scripts", "demo.sh"),
                 scratch.dir], DEMO_TIMEOUT)
        finally:
            leftovers = scratch.close()
        self.assertFalse(timed_out, "the demo took more than %d s:\n%s" % (
            DEMO_TIMEOUT, output))
        self.assertEqual(returncode, 0, output)
        for stage in ["== pvdisk mount", "== fio", "== pvdisk list",
                      "== pvdisk unmount", "pvdisk: unmounted"]:
            self.assertIn(stage, output)
        self.assertEqual(leftovers, [], "the demo left mounts behind")


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
