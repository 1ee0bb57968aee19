"""Shared by the tests of the documents (tests/docs): which files are the
documents, their fenced blocks with the marker line before each, and a
scratch folder that ends with nothing mounted below it and no daemon left.

The documents are README.md and docs/*.md (not the dated reports in
docs/perf/, which are records of past runs).

Markers, an HTML comment on the line before a block's opening fence:
  <!-- runnable -->              tests/docs/commands_test.py runs the block
  <!-- covered-by: A, B -->      tests named A and B (ctest names or gtest
                                 test names) run what the block shows
Every ```sh (or bash, shell) block carries one of them; output and syntax
go in ```text blocks, which need none.
"""
import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.realpath(__file__))))
SKIP = 77
SHELL_LANGUAGES = {"sh", "bash", "shell"}
OTHER_LANGUAGES = {"text", "console", "json", "c", "cpp", "python", "cmake"}


def documents():
    """Absolute paths of README.md and docs/*.md."""
    return [os.path.join(REPO, "README.md")] + sorted(
        glob.glob(os.path.join(REPO, "docs", "*.md")))


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def relative(path):
    return os.path.relpath(path, REPO)


class Block:
    """One fenced block: its file, first line number, language, marker
    (None, "runnable" or "covered-by") with its names, and its text."""

    def __init__(self, path, line, language, marker, names, text):
        self.path, self.line, self.language = path, line, language
        self.marker, self.names, self.text = marker, names, text

    def where(self):
        return "%s:%d" % (relative(self.path), self.line)


MARKER = re.compile(r"^<!--\s*(runnable|covered-by:(.*?))\s*-->\s*$")


def blocks(path):
    """The fenced blocks of one Markdown file, in order."""
    lines = read(path).split("\n")
    found = []
    i = 0
    while i < len(lines):
        fence = re.match(r"^(```+)\s*(\S*)", lines[i])
        if not fence:
            i += 1
            continue
        ticks, language = fence.group(1), fence.group(2)
        marker, names = None, []
        j = i - 1
        while j >= 0 and not lines[j].strip():
            j -= 1
        m = MARKER.match(lines[j].strip()) if j >= 0 else None
        if m:
            if m.group(1) == "runnable":
                marker = "runnable"
            else:
                marker = "covered-by"
                names = [n.strip() for n in m.group(2).split(",") if n.strip()]
        end = i + 1
        while end < len(lines) and not lines[end].startswith(ticks):
            end += 1
        found.append(Block(path, i + 1, language, marker, names,
                           "\n".join(lines[i + 1:end])))
        i = end + 1
    return found


def pvdisk_dir():
    """The folder holding the pvdisk binary (argv[1], from CMake)."""
    return os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(REPO, "build"))


def pvdisk():
    return os.path.join(pvdisk_dir(), "pvdisk")


def missing(fuse=False, tools=()):
    """Why this machine cannot run a test: pvdisk not built, /dev/fuse not
    usable, a tool not installed ("" if nothing is missing)."""
    why = []
    if not os.access(pvdisk(), os.X_OK):
        why.append("pvdisk not built in %s" % pvdisk_dir())
    if fuse and not os.access("/dev/fuse", os.R_OK | os.W_OK):
        why.append("/dev/fuse not usable")
    why += ["%s not found" % t for t in tools if not shutil.which(t)]
    return "; ".join(why)


def need_pvdisk():
    """Exits 77 (ctest's SKIP_RETURN_CODE) unless pvdisk is built."""
    why = missing()
    if why:
        print("SKIP: " + why)
        sys.exit(SKIP)


def mounts_below(folder):
    """(mountpoint, daemon pid or None) of every FUSE mount below folder."""
    folder = os.path.realpath(folder)
    found = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            sep = fields.index("-")
            point, fstype, source = fields[4], fields[sep + 1], fields[sep + 2]
            point = point.replace("\\040", " ")
            if not fstype.startswith("fuse") or not (
                    point == folder or point.startswith(folder + "/")):
                continue
            pid = None
            if source.startswith("pvdisk-") and source[7:].isdigit():
                pid = int(source[7:])
            found.append((point, pid))
    return found


def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


class Scratch:
    """A temporary folder; close() unmounts whatever is mounted below it,
    stops the daemons of those mounts and removes the folder. It returns
    what it had to clean up, so that a test can fail on a leftover."""

    def __init__(self, prefix="docs-test."):
        self.dir = tempfile.mkdtemp(prefix=prefix)

    def cleanup_mounts(self):
        leftovers = []
        for point, pid in reversed(mounts_below(self.dir)):
            leftovers.append(point)
            subprocess.run([pvdisk(), "unmount", point], capture_output=True,
                           timeout=90)
            if any(p == point for p, _ in mounts_below(self.dir)):
                subprocess.run(["fusermount3", "-u", "-z", point],
                               capture_output=True, timeout=30)
            if pid is not None and alive(pid):
                os.kill(pid, signal.SIGKILL)
                deadline = time.monotonic() + 10
                while alive(pid) and time.monotonic() < deadline:
                    try:
                        os.waitpid(pid, os.WNOHANG)
                    except ChildProcessError:
                        pass
                    time.sleep(0.01)
        return leftovers

    def close(self):
        leftovers = self.cleanup_mounts()
        shutil.rmtree(self.dir, ignore_errors=True)
        return leftovers


def run_in_own_group(argv, timeout, **popen_args):
    """Runs argv in a process group of its own and returns (returncode,
    output, timed_out). Whatever it started, in the background too, is
    killed when it is done; past `timeout` seconds it is killed at once and
    returncode is None. A child stuck in the kernel (on a FUSE mount that
    does not answer) may keep the output pipe open: then the output is
    given up on."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, **popen_args)
    timed_out = False
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, signal.SIGKILL)
        try:
            output, _ = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            output = "(no output: a child does not exit)"
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return (None if timed_out else proc.returncode), output, timed_out
