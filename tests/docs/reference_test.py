#!/usr/bin/env python3
"""docs/reference.md against the binary: every command of `pvdisk --help`,
every flag of every command's --help, every `pvdisk stat` column, every
--disk option (from the refusal of an unknown one, which lists them all),
every field of a real mount's stats.json (a small image mounted for it,
once with the defaults and once with --backend process), and every flag of
the bench tools' --help appear in the reference.

The other way round, a flag the reference names that the binary lacks
fails too. The man pages the build writes (BUILD_DIR/man: pvdisk.1 and
pvdisk-stats.5) render without a warning (groff -ww, man --warnings) and
name every flag, --disk option, stat column and counter of the reference.
Test-only faults come through the environment (PVDISK_TEST_FAULT), never
through --disk: an option --help marks "(test only)" fails the test.

Usage: reference_test.py PVDISK_DIR BUILD_DIR"""
import json
import os
import re
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import docslib  # noqa: E402

COMMANDS = ["create", "info", "mount", "unmount", "stat", "list", "trace",
            "powercut", "mark", "replay", "attach", "detach"]
BENCH_TOOLS = ["compare", "delay", "experiments", "spans", "trace_plot"]

REFERENCE = os.path.join(docslib.REPO, "docs", "reference.md")


def section(text, heading):
    """The text from the line `heading` to the next heading of its level or
    higher."""
    level = len(heading) - len(heading.lstrip("#"))
    lines = text.split("\n")
    start = lines.index(heading)
    out = []
    for line in lines[start + 1:]:
        m = re.match(r"^(#+) ", line)
        if m and len(m.group(1)) <= level:
            break
        out.append(line)
    return "\n".join(out)


def table_flags(text):
    """Flags named at the start of a table row: | `--name ...` |."""
    return set(re.findall(r"^\| `--([a-z0-9-]+)", text, re.MULTILINE))


def help_flags(command):
    out = subprocess.run([docslib.pvdisk(), command, "--help"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return set(re.findall(r"^  --([a-z0-9-]+)", out.stdout, re.MULTILINE))


def man_dir():
    build = sys.argv[2] if len(sys.argv) > 2 else os.path.join(docslib.REPO,
                                                                "build")
    return os.path.join(os.path.abspath(build), "man")


def render_man(page):
    """The text of a man page as man shows it, and the warnings groff and
    man gave (each a list of stderr lines)."""
    path = os.path.join(man_dir(), page)
    warnings = []
    out = subprocess.run(["groff", "-ww", "-man", "-Tutf8", "-z", path],
                         capture_output=True, text=True, timeout=60)
    warnings += out.stderr.splitlines()
    env = dict(os.environ, MANWIDTH="80", LC_ALL="C.UTF-8")
    out = subprocess.run(["man", "--warnings", "-l", path], env=env,
                         capture_output=True, text=True, timeout=60)
    warnings += out.stderr.splitlines()
    # Plain text: no hyphenation at line ends, no bold or underline.
    text = subprocess.run(["groff", "-man", "-Tutf8", "-P-cbou",
                           "-rHY=0", "-dAD=l", "-rLL=400n", path],
                          capture_output=True, text=True, timeout=60).stdout
    return text.replace("\u2010", "-"), warnings


def backticked_names(text):
    """Names in backticks at the start of a table row: | `a`, `b` | ..."""
    names = set()
    for row in re.findall(r"^\| (`[^|]*)\|", text, re.MULTILINE):
        names |= set(re.findall(r"`([^`]+)`", row))
    return names


def stats_keys(doc):
    """Every key of a stats.json document, by where it sits."""
    keys = set(doc)
    for disk in doc["disks"]:
        keys |= set(disk) | set(disk["config"]) | set(disk["total"])
        for queue in disk["queues"]:
            keys |= set(queue)
    return keys


class ReferenceTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.text = docslib.read(REFERENCE)

    def test_every_command_has_a_section(self):
        out = subprocess.run([docslib.pvdisk(), "--help"], capture_output=True,
                             text=True, timeout=30).stdout
        commands = re.findall(r"^  ([a-z]+) ", out, re.MULTILINE)
        self.assertEqual(sorted(commands), sorted(COMMANDS),
                         "pvdisk --help lists other commands than this test")
        for command in commands:
            self.assertIn("## pvdisk " + command, self.text.split("\n"))

    def test_every_flag_of_every_command(self):
        missing, stale = [], []
        for command in COMMANDS:
            documented = table_flags(section(self.text, "## pvdisk " + command))
            in_binary = help_flags(command)
            missing += ["pvdisk %s --%s" % (command, f)
                        for f in sorted(in_binary - documented)]
            stale += ["pvdisk %s --%s" % (command, f)
                      for f in sorted(documented - in_binary)]
        self.assertEqual(missing, [], "flags the reference lacks")
        self.assertEqual(stale, [], "flags the reference names that pvdisk "
                         "does not have")

    def test_every_stat_column(self):
        out = subprocess.run([docslib.pvdisk(), "stat", "--help"],
                             capture_output=True, text=True, timeout=30).stdout
        columns = re.search(r"columns:\n(.*?)\nflags:", out, re.DOTALL)
        self.assertIsNotNone(columns, out)
        names = re.findall(r"^  (\S+)", columns.group(1), re.MULTILINE)
        self.assertGreater(len(names), 10)
        stat = section(self.text, "## pvdisk stat")
        missing = [n for n in names if "`%s`" % n not in stat]
        self.assertEqual(missing, [], "stat columns the reference lacks")

    def test_every_disk_option(self):
        scratch = docslib.Scratch()
        try:
            allowed = []
            for disk in ["x,no-such-option", "rbd:p/i,no-such-option"]:
                out = subprocess.run(
                    [docslib.pvdisk(), "mount", scratch.dir, "--disk", disk],
                    capture_output=True, text=True, timeout=30)
                self.assertEqual(out.returncode, 2, out.stderr)
                m = re.search(r"allowed: (.*)$", out.stderr.strip())
                self.assertIsNotNone(m, out.stderr)
                allowed += m.group(1).split(", ")
        finally:
            self.assertEqual(scratch.close(), [])
        options, test_only = set(), set()
        for item in allowed:
            item = re.sub(r"^and for rbd: disks ", "", item)
            name = re.match(r"[a-z][a-z_-]*", item).group(0)
            (test_only if "(test only)" in item else options).add(name)
        self.assertEqual(sorted(test_only), [],
                         "test-only --disk options: test faults belong in "
                         "PVDISK_TEST_FAULT (src/io/test_fault.h)")
        disk_section = section(self.text, "### --disk options")
        documented = set(re.findall(r"^\| `([a-z][a-z_-]*)", disk_section,
                                    re.MULTILINE))
        self.assertEqual(sorted(options - documented), [],
                         "--disk options the reference lacks")
        self.assertEqual(sorted(documented - options), [],
                         "--disk options the reference names that pvdisk "
                         "does not have")

    def test_every_stats_field_of_a_real_mount(self):
        if docslib.missing(fuse=True):
            self.skipTest(docslib.missing(fuse=True))
        scratch = docslib.Scratch()
        keys = set()
        try:
            image = os.path.join(scratch.dir, "disk0.img")
            subprocess.run([docslib.pvdisk(), "create", image, "--size", "16M"],
                           check=True, capture_output=True, timeout=30)
            for n, flags in enumerate(
                    [[], ["--backend", "process", "--frontend", "nvme"]]):
                mnt = os.path.join(scratch.dir, "mnt%d" % n)
                os.mkdir(mnt)
                out = subprocess.run(
                    [docslib.pvdisk(), "mount", mnt, "--disk", image] + flags,
                    capture_output=True, text=True, timeout=60)
                self.assertEqual(out.returncode, 0, out.stderr)
                keys |= stats_keys(json.loads(docslib.read(
                    os.path.join(mnt, "stats.json"))))
                out = subprocess.run([docslib.pvdisk(), "unmount", mnt],
                                     capture_output=True, text=True,
                                     timeout=90)
                self.assertEqual(out.returncode, 0, out.stderr)
        finally:
            self.assertEqual(scratch.close(), [], "mounts left behind")
        self.assertIn("backend_pid", keys)  # the second mount's config
        self.assertIn("nvme_data", keys)  # and its frontend's
        stats = section(self.text, "## The stats files")
        missing = sorted(k for k in keys if "`%s`" % k not in stats)
        self.assertEqual(missing, [], "stats.json fields the reference lacks")

    def test_man_pages(self):
        why = docslib.missing(tools=("groff", "man"))
        if why:
            self.skipTest(why)
        for page in ["pvdisk.1", "pvdisk-stats.5"]:
            self.assertTrue(os.path.exists(os.path.join(man_dir(), page)),
                            "%s not built in %s" % (page, man_dir()))
        man1, warnings1 = render_man("pvdisk.1")
        man5, warnings5 = render_man("pvdisk-stats.5")
        self.assertEqual(warnings1 + warnings5, [], "man page warnings")
        missing = []
        sections = re.split(r"^   pvdisk ([a-z]+)$", man1, flags=re.MULTILINE)
        by_command = dict(zip(sections[1::2], sections[2::2]))
        for command in COMMANDS:
            documented = table_flags(section(self.text, "## pvdisk " + command))
            page = by_command.get(command, "")
            missing += ["pvdisk(1) %s --%s" % (command, f)
                        for f in sorted(documented)
                        if not re.search(r"^ +--%s\b" % f, page, re.MULTILINE)]
        disk_section = section(self.text, "### --disk options")
        for option in sorted(set(re.findall(r"^\| `([a-z][a-z0-9_-]*)",
                                            disk_section, re.MULTILINE))):
            if not re.search(r"^ +%s\b" % option, by_command.get("mount", ""),
                             re.MULTILINE):
                missing.append("pvdisk(1) --disk option " + option)
        stat = section(self.text, "## pvdisk stat")
        for column in sorted(backticked_names(stat)):
            if column.startswith("--"):
                continue
            for page, text in [("pvdisk(1)", by_command.get("stat", "")),
                               ("pvdisk-stats(5)", man5)]:
                if not re.search(r"^ +%s( |$)" % re.escape(column), text,
                                 re.MULTILINE):
                    missing.append("%s stat column %s" % (page, column))
        for heading in ["### Counters (columns of `stats`, keys of each "
                        "queue and `total`)", "### Latency columns"]:
            for name in sorted(backticked_names(section(self.text, heading))):
                if not re.search(r"^ +%s( |$)" % re.escape(name), man5,
                                 re.MULTILINE):
                    missing.append("pvdisk-stats(5) column " + name)
        self.assertEqual(missing, [], "what the man pages lack")

    def test_every_flag_of_the_bench_tools(self):
        tools = section(self.text, "## Benchmark tools")
        missing = []
        for tool in BENCH_TOOLS:
            out = subprocess.run(
                [sys.executable, os.path.join(docslib.REPO, "bench", tool),
                 "--help"], capture_output=True, text=True, timeout=30)
            self.assertEqual(out.returncode, 0, out.stderr)
            usage = out.stdout.split("\n\n", 1)[0]
            rows = [line for line in tools.split("\n")
                    if "bench/%s " % tool in line]
            for flag in sorted(set(re.findall(r"--[a-z][a-z-]*", usage))):
                if not any(re.search(r"(?<![a-z-])%s(?![a-z-])" % flag, row)
                           for row in rows):
                    missing.append("bench/%s %s" % (tool, flag))
        self.assertEqual(missing, [], "bench tool flags the reference lacks")


if __name__ == "__main__":
    docslib.need_pvdisk()
    unittest.main(argv=sys.argv[:1])
