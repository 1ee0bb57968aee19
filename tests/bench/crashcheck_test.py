#!/usr/bin/env python3
"""bench/crashcheck runs a few power cuts of each kind for real (ext4 under
its workload, sqlite3 in WAL and rollback-journal mode) and passes; and
with a lying flush (PVDISK_TEST_FAULT=lying-flush: a flush completes before
the writes it covers are safe) the same check of sqlite3 fails, or it
would prove nothing. Needs root, losetup, mkfs.ext4, e2fsck and /dev/fuse.

Usage: crashcheck_test.py [BUILD_DIR]"""
import importlib.machinery
import importlib.util
import os
import sqlite3
import subprocess
import sys
import tempfile
import unittest

from benchtest import BENCH, SKIP, build_dir, need

TOOL = os.path.join(BENCH, "crashcheck")


def run(*args, env=None):
    return subprocess.run([sys.executable, TOOL, "--build", build_dir()] +
                          list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=240,
                          env=env)


class CrashcheckTest(unittest.TestCase):
    def test_a_few_cuts_of_each_kind_pass(self):
        result = run("--cuts", "2", "--sqlite-cuts", "1", "--seed", "11",
                     "--max-steps", "8")
        print(result.stdout)
        self.assertEqual(result.returncode, 0, result.stdout)
        last = result.stdout.strip().splitlines()[-1]
        self.assertEqual(
            last, "crashcheck: PASS ext4 2 cuts, sqlite-wal 1 cuts, "
            "sqlite-delete 1 cuts (0 failures)")
        for kind in ("ext4: 2 cuts", "sqlite-wal: 1 cuts",
                     "sqlite-delete: 1 cuts"):
            self.assertIn(kind, result.stdout)

    def test_a_lying_flush_is_caught(self):
        # Three cuts, not one: a cut that comes after the write-out has
        # caught up loses nothing even with a lying flush (seen once in a
        # full suite on a loaded machine); the check fails if any cut does.
        env = dict(os.environ, PVDISK_TEST_FAULT="lying-flush")
        result = run("--kinds", "sqlite-delete", "--sqlite-cuts", "3",
                     "--seed", "3", "--min-steps", "12", "--max-steps", "16",
                     env=env)
        print(result.stdout)
        self.assertEqual(result.returncode, 1, result.stdout)
        self.assertIn("crashcheck: FAIL", result.stdout)

    def test_bad_kinds_are_refused_in_one_line(self):
        result = run("--kinds", "xfs")
        self.assertEqual(result.returncode, 2)
        self.assertIn("--kinds takes ext4, sqlite-wal, sqlite-delete, got 'xfs'",
                      result.stdout)


def load_tool():
    # bench/crashcheck is a script without a .py name: load it as a module
    # to reach its judge.
    loader = importlib.machinery.SourceFileLoader("crashcheck", TOOL)
    spec = importlib.util.spec_from_loader("crashcheck", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


class SqliteJudgeTest(unittest.TestCase):
    def test_a_torn_database_is_a_verdict_not_a_crash(self):
        # A cut can leave test.db with a header sqlite cannot read; the
        # judge reports it as a failure of that cut (the tool then prints
        # "crashcheck: FAIL"), it does not end the run with a traceback.
        judge = load_tool().SqliteJudge()
        judge.take({"c": [1, 2]})
        with tempfile.TemporaryDirectory() as fs:
            with open(os.path.join(fs, "test.db"), "wb") as f:
                f.write(b"SQLite format 3\0" + b"\xff" * 4080)
            problems = judge.check(fs)
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("sqlite cannot read test.db: DatabaseError", problems[0])

    def test_no_table_is_a_failure_only_after_a_commit(self):
        tool = load_tool()
        with tempfile.TemporaryDirectory() as fs:
            sqlite3.connect(os.path.join(fs, "test.db")).close()
            self.assertEqual(tool.SqliteJudge().check(fs), [])
            judge = tool.SqliteJudge()
            judge.take({"c": [1]})
            problems = judge.check(fs)
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("no such table: t", problems[0])


if __name__ == "__main__":
    need("losetup", "mkfs.ext4", "e2fsck")
    if os.geteuid() != 0:
        print("SKIP: needs root (loop devices, mount)")
        sys.exit(SKIP)
    unittest.main(argv=sys.argv[:1])
