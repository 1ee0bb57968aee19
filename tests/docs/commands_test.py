#!/usr/bin/env python3
"""Every command shown in README.md and docs/*.md runs as shown, or a named
test runs it:

- each ```sh block carries a marker (tests/docs/docslib.py): a block marked
  runnable is run here, with bash -e, in a fresh temporary folder, with
  PVDISK_DIR first on PATH; afterwards nothing may be mounted below that
  folder (anything is unmounted and its daemon killed, and the test fails);
- a block marked covered-by names tests that must exist: ctest tests of
  BUILD_DIR (`ctest -N`) or gtest tests in tests/;
- a block without a language is refused (output and syntax are ```text).

Usage: commands_test.py PVDISK_DIR BUILD_DIR"""
import glob
import os
import re
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import docslib  # noqa: E402

BLOCK_TIMEOUT = 60


def build_dir():
    return os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else
                           os.path.join(docslib.REPO, "build"))


def all_blocks():
    return [b for path in docslib.documents() for b in docslib.blocks(path)]


def known_tests():
    """ctest names of the build tree, and gtest test names in tests/."""
    names = set()
    out = subprocess.run(["ctest", "-N"], cwd=build_dir(), capture_output=True,
                         text=True, timeout=60)
    names |= set(re.findall(r"Test\s+#\d+: (\S+)", out.stdout))
    for source in glob.glob(os.path.join(docslib.REPO, "tests", "**", "*.cc"),
                            recursive=True):
        names |= set(re.findall(r"^TEST(?:_F|_P)?\(\w+,\s*(\w+)\)",
                                docslib.read(source), re.MULTILINE))
    return names


class CommandsTest(unittest.TestCase):

    def test_every_block_is_marked(self):
        bad = []
        for b in all_blocks():
            if not b.language:
                bad.append("%s: a block without a language (sh or text)"
                           % b.where())
            elif b.language in docslib.SHELL_LANGUAGES and b.marker is None:
                bad.append("%s: a shell block with no runnable or covered-by "
                           "marker" % b.where())
            elif (b.language not in docslib.SHELL_LANGUAGES and
                  b.language not in docslib.OTHER_LANGUAGES):
                bad.append("%s: unknown block language %r" % (b.where(),
                                                              b.language))
        self.assertEqual(bad, [], "\n".join(bad))

    def test_covering_tests_exist(self):
        known = known_tests()
        if not any(name.startswith("docs.") for name in known):
            self.skipTest("ctest -N in %s lists no docs tests: not a "
                          "configured build tree" % build_dir())
        bad = []
        for b in all_blocks():
            if b.marker != "covered-by":
                continue
            if not b.names:
                bad.append("%s: covered-by names no test" % b.where())
            bad += ["%s: no test named %s" % (b.where(), n)
                    for n in b.names if n not in known]
        self.assertEqual(bad, [], "\n".join(bad))

    def test_runnable_blocks_run_as_shown(self):
        why = docslib.missing(fuse=True, tools=["fio"])
        if why:
            self.skipTest(why)
        runnable = [b for b in all_blocks() if b.marker == "runnable"]
        self.assertGreater(len(runnable), 0)
        for b in runnable:
            with self.subTest(block=b.where()):
                self.run_block(b)

    def run_block(self, block):
        scratch = docslib.Scratch()
        env = dict(os.environ,
                   PATH=docslib.pvdisk_dir() + os.pathsep + os.environ["PATH"],
                   TMPDIR=scratch.dir)
        try:
            returncode, output, timed_out = docslib.run_in_own_group(
                ["bash", "-euo", "pipefail", "-c", block.text], BLOCK_TIMEOUT,
                cwd=scratch.dir, env=env)
        finally:
            leftovers = scratch.close()
        self.assertFalse(timed_out, "%s took more than %d s:\n%s" % (
            block.where(), BLOCK_TIMEOUT, output))
        self.assertEqual(returncode, 0, "%s failed:\n%s" % (
            block.where(), output))
        self.assertEqual(leftovers, [], "%s left mounts behind" %
                         block.where())


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
