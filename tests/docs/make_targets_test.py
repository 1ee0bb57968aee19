#!/usr/bin/env python3
"""Every `make TARGET` that README.md and docs/*.md show, in shell blocks
and in docs/reference.md's table of targets, is a target of the Makefile:
`make -n TARGET` (a dry run: nothing is built, installed or run) succeeds.

Usage: make_targets_test.py [PVDISK_DIR]"""
import os
import re
import shlex
import shutil
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import docslib  # noqa: E402


def targets_in(text):
    """Targets of every `make ...` command in text: words after make that
    are not options (and their values) or VAR=value assignments."""
    found = set()
    for m in re.finditer(r"(?:^|[\s`;&(])make((?:[ \t]+[^\s#`;&|)]+)+)", text):
        words = shlex.split(m.group(1), comments=True)
        skip = False
        for word in words:
            if skip:
                skip = False
            elif word in ("-C", "-f", "-j"):
                skip = True
            elif word.startswith("-") or "=" in word:
                continue
            elif re.fullmatch(r"[a-z][a-z0-9-]*", word):
                found.add(word)
            else:
                break
    return found


def documented_targets():
    targets = set()
    for path in docslib.documents():
        for block in docslib.blocks(path):
            if block.language in docslib.SHELL_LANGUAGES:
                targets |= targets_in(block.text)
    reference = docslib.read(os.path.join(docslib.REPO, "docs",
                                          "reference.md"))
    for cell in re.findall(r"^\| (`make [^|]*)\|", reference, re.MULTILINE):
        for code in re.findall(r"`(make [^`]+)`", cell):
            targets |= targets_in(code)
    return targets


class MakeTargetsTest(unittest.TestCase):

    def test_the_parser(self):
        self.assertEqual(targets_in("make fuzz FUZZ_SECONDS=600  # longer"),
                         {"fuzz"})
        self.assertEqual(targets_in("git worktree add /tmp/b HEAD~1 && "
                                    "make -C /tmp/b build-pvdisk"),
                         {"build-pvdisk"})
        self.assertEqual(targets_in('make bench-experiments ARGS="--only x"'),
                         {"bench-experiments"})

    def test_every_documented_target_exists(self):
        if not shutil.which("make"):
            self.skipTest("make not found")
        targets = documented_targets()
        self.assertTrue({"run", "test"} <= targets, targets)
        missing = []
        for target in sorted(targets):
            out = subprocess.run(["make", "-n", target], cwd=docslib.REPO,
                                 capture_output=True, text=True, timeout=60)
            if out.returncode == 0:
                continue
            missing.append("make %s: %s" % (target, out.stderr.strip()))
        self.assertEqual(missing, [], "\n".join(missing))


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1])
