"""fio: the standard matrix (docs/PERFORMANCE.md), the command line of
one job, and the numbers read from fio's JSON output."""
import json
import os
import shlex
import subprocess

from . import BenchError

# Options every measured job gets (the standard matrix, docs/PERFORMANCE.md).
COMMON = ["--ioengine=io_uring", "--direct=1", "--time_based",
          "--group_reporting"]

# The standard matrix: job name -> fio options without dashes.
MATRIX = {
    "rr4k_qd1": "rw=randread bs=4k iodepth=1",
    "rr4k_qd32": "rw=randread bs=4k iodepth=32",
    "rr4k_2x32": "rw=randread bs=4k iodepth=32 numjobs=2",
    "rw4k_qd32": "rw=randwrite bs=4k iodepth=32",
    "sr128k_qd8": "rw=read bs=128k iodepth=8",
    "sw1m_qd4": "rw=write bs=1m iodepth=4",
}


class FioError(BenchError):
    """fio failed or printed something that is not its JSON report."""


def options(text):
    """'rw=read bs=4k' -> ['--rw=read', '--bs=4k'] (fio options without dashes)."""
    return ["--" + word for word in shlex.split(text or "")]


def runtime_option(seconds):
    """--runtime=...: whole seconds as they are, a fraction in ms (fio reads
    "0.5" as 0, and a time-based job without a runtime covers the whole
    file: a short run becomes seconds or minutes)."""
    seconds = float(seconds)
    value = (int(seconds) if seconds.is_integer()
             else "%dms" % round(seconds * 1000))
    return "--runtime=%s" % value


def command(name, filename, job="", runtime=5, jobfile=None, extra=""):
    """The fio command line of one measured job on `filename`: a job file or
    --name, then the common options, the runtime, the job's options and the
    extra options (later options win)."""
    args = ["fio", jobfile] if jobfile else ["fio", "--name=" + name]
    args += ["--filename=" + filename] + COMMON + [runtime_option(runtime)]
    return args + options(job) + options(extra)


def shown(cmd, filename, placeholder):
    """The command as a shell line, with the target's path replaced by a
    placeholder (so that a report names the command, not a temp path)."""
    return shlex.join(a.replace(filename, placeholder) for a in cmd)


def parse(text):
    """fio's JSON report -> {iops, mib_s, mean_us, p99_us, lat_us} of the
    first (group-reported) job, reads and writes together; mean_us and p99_us
    are fio's completion latency (clat) of the direction that moved data,
    lat_us its whole latency (submission to completion, lat). At iodepth 1
    on a FUSE file the two differ by where the request is served: when the
    server's thread runs on the submitter's CPU it serves the request inside
    the submitting system call, which fio counts as submission (clat is then
    a few microseconds); only lat holds the round trip either way."""
    try:
        out = json.loads(text[text.index("{"):])["jobs"][0]
    except (ValueError, KeyError, IndexError) as e:
        raise FioError("fio printed no JSON report (%s)" % e) from None
    read, write = out["read"], out["write"]
    lat = [d["clat_ns"] for d in (read, write) if d["io_bytes"] > 0]
    total = [d["lat_ns"] for d in (read, write)
             if d["io_bytes"] > 0 and "lat_ns" in d]
    return {
        "iops": read["iops"] + write["iops"],
        "mib_s": (read["bw_bytes"] + write["bw_bytes"]) / 2**20,
        "mean_us": lat[0]["mean"] / 1000 if lat else 0.0,
        "p99_us": (lat[0].get("percentile", {}).get("99.000000", 0) / 1000
                   if lat else 0.0),
        "lat_us": total[0]["mean"] / 1000 if total else None,
    }


def io_count(text):
    """How many I/Os (reads and writes) fio's JSON report says it did."""
    out = json.loads(text[text.index("{"):])["jobs"][0]
    return out["read"]["total_ios"] + out["write"]["total_ios"]


def cpu_ticks():
    """(busy, total) clock ticks of all CPUs since boot, from /proc/stat
    (busy = everything but idle and iowait)."""
    with open("/proc/stat") as f:
        ticks = [int(x) for x in f.readline().split()[1:]]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)
    return sum(ticks) - idle, sum(ticks)


def run(cmd, env=None):
    """Runs one fio command and returns parse() of its report, plus the
    machine's CPU use meanwhile: cpu_busy_pct (of all CPUs) and
    cpu_us_per_io (busy CPU time of the whole machine per I/O: fio, the
    kernel and the FUSE server together; the cost that decides how far
    two cores go). env: the command's environment (default this one's)."""
    busy0, total0 = cpu_ticks()
    p = subprocess.run(cmd + ["--output-format=json"], text=True,
                       capture_output=True, env=env)
    busy1, total1 = cpu_ticks()
    if p.returncode != 0:
        lines = (p.stderr or p.stdout).strip().splitlines() or ["no output"]
        raise FioError("fio failed (status %d): %s" % (p.returncode, lines[-1]))
    result = parse(p.stdout)
    busy, total = busy1 - busy0, total1 - total0
    ios = io_count(p.stdout)
    tick_us = 1e6 / os.sysconf("SC_CLK_TCK")
    result["cpu_busy_pct"] = 100.0 * busy / total if total else 0.0
    result["cpu_us_per_io"] = busy * tick_us / ios if ios else 0.0
    return result


def _sequential(name, path, size, options, what):
    """One sequential fio pass of 1 MiB requests, O_DIRECT, over the first
    `size` bytes of `path`; raises FioError naming `what` on failure."""
    cmd = ["fio", "--name=" + name, "--filename=" + path, "--bs=1m",
           "--direct=1", "--ioengine=io_uring", "--size=%d" % size,
           "--output-format=terse"] + options
    p = subprocess.run(cmd, text=True, capture_output=True)
    if p.returncode != 0:
        raise FioError("%s failed: %s"
                       % (what, (p.stderr.strip().splitlines() or ["?"])[-1]))


def fill(image, size):
    """Writes random data over the whole image (so that reads hit allocated
    blocks, not holes)."""
    _sequential("fill", image, size, ["--rw=write", "--refill_buffers"],
                "filling the image")


def read_all(path, size):
    """Reads the first `size` bytes of `path` once, sequentially, with
    O_DIRECT (so that what serves the file, not the page cache, reads
    them)."""
    _sequential("read-all", path, size, ["--rw=read", "--iodepth=8"],
                "reading the image")
