"""Command-line plumbing of bench/compare and bench/experiments: option
checks that end in one line and exit status 2, the tools a run needs, where
results go, and signals that still let a run clean up."""
import argparse
import math
import os
import re
import shutil
import signal
import sys
import time

from . import BenchError

# The checkout this module belongs to: results/ and build/ live there.
REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.realpath(__file__))))
USAGE = 2  # exit status for bad options and missing tools


class Parser(argparse.ArgumentParser):
    """argparse that reports a bad option as one line, "PROG: MESSAGE", and
    exits with status 2 (no usage dump)."""

    def error(self, message):
        fail(self.prog, message)


def fail(prog, message, status=USAGE):
    """Prints "PROG: MESSAGE" on stderr and exits."""
    print("%s: %s" % (prog, message), file=sys.stderr)
    sys.exit(status)


def positive_number(text):
    """argparse type: a number above 0 (seconds)."""
    try:
        value = float(text)
    except ValueError:
        value = 0
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(
            "'%s' is not allowed: use a number of seconds above 0" % text)
    return int(value) if value == int(value) else value


def seconds_or_zero(text):
    """argparse type: a number of seconds, 0 or above (0: none)."""
    try:
        value = float(text)
    except ValueError:
        value = -1
    if not (value >= 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(
            "'%s' is not allowed: use a number of seconds, 0 or above" % text)
    return int(value) if value == int(value) else value


def positive_int(text):
    """argparse type: a whole number from 1 up."""
    if not re.fullmatch(r"[0-9]+", text) or int(text) < 1:
        raise argparse.ArgumentTypeError(
            "'%s' is not allowed: use a whole number from 1 up" % text)
    return int(text)


def positive_int_list(text):
    """argparse type: a comma list of whole numbers from 1 up -> list in the
    order given, each once."""
    values = [v.strip() for v in text.split(",") if v.strip()]
    if not values or not all(re.fullmatch(r"[0-9]+", v) and int(v) >= 1
                             for v in values):
        raise argparse.ArgumentTypeError(
            "'%s' is not allowed: use a comma list of whole numbers from 1 "
            "up, such as 1,4,32" % text)
    return list(dict.fromkeys(int(v) for v in values))


def image_size(text):
    """argparse type: a size such as 64M or 1G (K, M, G, T are powers of
    1024), a whole number of MiB from 16M up -> bytes."""
    m = re.fullmatch(r"([0-9]+)([KMGT]?)", text.strip().upper())
    value = int(m.group(1)) * 1024 ** " KMGT".index(m.group(2) or " ") if m else 0
    if value < 16 << 20 or value % (1 << 20):
        raise argparse.ArgumentTypeError(
            "'%s' is not allowed: use a whole number of MiB from 16M up, "
            "such as 64M or 1G" % text)
    return value


def one_of(allowed):
    """argparse type: a comma list of names from `allowed` -> list in the
    order given."""
    def parse(text):
        names = [n.strip() for n in text.split(",") if n.strip()]
        bad = [n for n in names if n not in allowed]
        if bad or not names:
            raise argparse.ArgumentTypeError(
                "'%s' is not allowed: use a comma list of %s"
                % (",".join(bad) or text, ", ".join(allowed)))
        return list(dict.fromkeys(names))
    return parse


def check_tools(prog, build, tools):
    """Exits with one message (status 2) unless BUILD/pvdisk, /dev/fuse and
    every command in `tools` are there."""
    pvdisk = os.path.join(build, "pvdisk")
    if not os.access(pvdisk, os.X_OK):
        fail(prog, "%s not found: build first (make build) or pass --build DIR"
             % pvdisk)
    if not os.path.exists("/dev/fuse"):
        fail(prog, "/dev/fuse not found: FUSE mounts are not possible here")
    for tool, package in tools:
        if not shutil.which(tool):
            fail(prog, "%s not found: install %s (scripts/install-deps.sh)"
                 % (tool, package))


def timestamp():
    """Local time as 20261130-031400, for result names."""
    return time.strftime("%Y%m%d-%H%M%S")


def default_results():
    """results/ of this checkout (gitignored)."""
    return os.path.join(REPO, "results")


def interrupt_on_signals():
    """SIGTERM and SIGHUP raise KeyboardInterrupt like Ctrl-C does, so that
    the with-blocks unmount and stop everything before the script exits."""
    def handler(signum, frame):
        raise KeyboardInterrupt
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, handler)


def main(prog, body):
    """Runs body(); a failure or an interrupt ends in one line and a status
    (the error's, 1, or 130 for an interrupt) once cleanup has run."""
    interrupt_on_signals()
    try:
        return body()
    except KeyboardInterrupt:
        fail(prog, "interrupted; everything it mounted or started is stopped",
             130)
    except BenchError as e:
        fail(prog, str(e), e.status)
    except OSError as e:
        fail(prog, str(e), 1)
