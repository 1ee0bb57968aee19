"""spans: where a request's time goes, layer by layer, from kernel
tracepoints (perf record -a on io_uring, fuse and block events).

Each span is paired exactly, request by request:
  fio      fio's io_uring request: submitted -> its completion posted
           (io_uring_submit_req / io_uring_complete of fio's rings, by
           request pointer)
  fuse     the FUSE request: sent by the kernel -> ended by the reply
           (fuse_request_send / fuse_request_end, by unique; READ and WRITE)
  held     pvdisk's FUSE ring entry: the kernel posts the request into it
           -> pvdisk commits the reply (the entry command's completion and
           its next COMMIT_AND_FETCH, by user_data)
  image    pvdisk's own I/O on the image: submitted -> completion posted
           (read and write operations on pvdisk's rings, by request
           pointer; the eventfd read a queue thread keeps armed is left out)
The device's own time comes from /proc/diskstats (the caller's), not from
a tracepoint: block_rq_complete misses batched completions on this kernel.

Differences of the means then say where the time goes: fio - fuse is
fio's side (the io_uring request around the FUSE one), fuse - held the
delivery into pvdisk's ring, held - image pvdisk's own handling of the
request outside its I/O, image - device the image I/O outside the device
(the filesystem, the block layer, the completion's way back).

Tracing costs time at every event (a few hundred ns here), so the spans
are longer and the IOPS lower than untraced: compare the shares, and
targets traced in the same run."""
import contextlib
import os
import re
import subprocess
import sys

from . import BenchError

EVENTS = ["io_uring:io_uring_submit_req", "io_uring:io_uring_complete",
          "fuse:fuse_request_send", "fuse:fuse_request_end"]

SPANS = ["fio", "fuse", "held", "image"]

# Where the kernel lists its tracepoints: tracefs, or its older place under
# debugfs.
TRACEFS = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]


def _tracefs_in_kernel():
    with open("/proc/filesystems") as f:
        return any(line.split()[-1:] == ["tracefs"] for line in f)


@contextlib.contextmanager
def tracepoints(log=sys.stderr):
    """The events directory of a mounted tracefs holding EVENTS, for the
    run. A kernel that has tracefs where nothing mounted it (a Debian VM
    without systemd's sys-kernel-tracing.mount) gets it mounted on
    /sys/kernel/tracing for the run and unmounted after (root only, as
    perf -a is). A kernel without tracefs or without the tracepoints: a
    BenchError (status 2) naming what is missing."""
    events = next((os.path.join(d, "events") for d in TRACEFS
                   if os.path.isdir(os.path.join(d, "events"))), None)
    mounted = None
    if events is None:
        if not _tracefs_in_kernel():
            raise BenchError("this kernel has no tracefs (not in "
                             "/proc/filesystems): no tracepoints to trace", 2)
        done = subprocess.run(["mount", "-t", "tracefs", "nodev", TRACEFS[0]],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise BenchError("tracefs is not mounted and mounting it on %s "
                             "failed: %s" % (TRACEFS[0],
                                             done.stderr.strip()), 2)
        mounted = TRACEFS[0]
        events = os.path.join(mounted, "events")
        print("spans: mounted tracefs on %s for this run" % mounted, file=log)
    try:
        missing = [e for e in EVENTS
                   if not os.path.isdir(os.path.join(events, *e.split(":")))]
        if missing:
            raise BenchError("this kernel has no %s tracepoint (under %s): "
                             "the fuse ones came in Linux 6.11"
                             % (", ".join(missing), events), 2)
        yield events
    finally:
        if mounted:
            subprocess.run(["umount", mounted], capture_output=True)

# pvdisk's I/O on the image: these io_uring operations on its rings.
IMAGE_OPS = {"READ", "WRITE", "READV", "WRITEV", "READ_FIXED", "WRITE_FIXED"}
# The user_data of the eventfd read each queue thread keeps armed
# (UringChannel's kWakeTag): a READ that is not image I/O.
WAKE_TAG = "0x100000000"
# Other eventfd reads on the daemon's rings (the inline driver's kicks, an
# engine's wake-ups) carry lent tags like image I/O; they complete with the
# 8 bytes of an eventfd counter, which no image I/O (whole sectors) does.
EVENTFD_RESULT = "8"
# A FUSE ring entry's commands carry its queue and index below 2^32
# (UringChannel's EntryTag); lent tags and the wake tag are above.
ENTRY_TAGS_BELOW = 1 << 32
# FUSE opcodes whose requests carry the data: READ 15, WRITE 16.
DATA_OPCODES = {"15", "16"}

_LINE = re.compile(r"^\s*(?P<comm>.+?)\s+(?P<pid>\d+)\s+\[(?P<cpu>\d+)\]\s+"
                   r"(?P<ts>[\d.]+):\s+(?P<event>\S+):\s*(?P<rest>.*)$")
_FIELD = {name: re.compile(r"\b%s (\S+?),?(?:\s|$)" % name)
          for name in ("ring", "req", "user_data", "opcode", "result")}
_UNIQUE = re.compile(r"\breq (\d+)")
_FUSE_OPCODE = re.compile(r"\bopcode (\d+)")


def perf_command(output, command):
    """The perf record command line that traces `command` (a list) with
    every CPU's events into `output`."""
    args = ["perf", "record", "-q", "-a", "-m", "8192", "-o", output]
    for event in EVENTS:
        args += ["-e", event]
    return args + ["--"] + command


def script_command(data):
    """The perf script command line whose output parse() reads."""
    return ["perf", "script", "-i", data, "-F", "comm,pid,cpu,time,event,trace"]


def _field(name, rest):
    m = _FIELD[name].search(rest)
    return m.group(1) if m else None


def _is_entry(user_data):
    try:
        return int(user_data, 16) < ENTRY_TAGS_BELOW
    except (TypeError, ValueError):
        return False


def parse(lines, daemon_prefix="pvdisk", client="fio", margin_s=0.3,
          in_flight=None):
    """perf script lines -> {span: [seconds, ...]} of the requests that
    started after the first `margin_s` and before the last `margin_s` of
    the trace (the steady state). Rings are told apart by who submits on
    them: `client`'s (fio) or threads named `daemon_prefix`...; a ring's
    events before its first submission are not followed (the margin covers
    them). One pass: only the requests still open are kept.

    `in_flight` (a dict, optional) receives the time, in seconds, that the
    daemon spent with each number of image I/Os in flight within the same
    steady state: whether its I/O reaches the device as a steady stream or
    as a convoy (all or nothing). Counted from the completed image spans,
    so the eventfd reads (told apart only by their result) are left out."""
    owner = {}    # ring -> "client" or "daemon", from its submissions
    started = {}  # (span, id) -> when it began
    done = {name: [] for name in SPANS}  # (began, lasted) per span
    first_ts = last_ts = None

    def end(key, span, ts):
        begun = started.pop(key, None)
        if begun is not None:
            done[span].append((begun, ts - begun))

    for line in lines:
        m = _LINE.match(line)
        if not m:
            continue
        ts, event, rest = float(m.group("ts")), m.group("event"), m.group("rest")
        first_ts = ts if first_ts is None else first_ts
        last_ts = ts
        if event == "io_uring:io_uring_submit_req":
            ring = _field("ring", rest)
            comm = m.group("comm")
            if ring not in owner:
                if comm.startswith(daemon_prefix):
                    owner[ring] = "daemon"
                elif comm == client:
                    owner[ring] = "client"
            who = owner.get(ring)
            op = _field("opcode", rest)
            user_data = _field("user_data", rest)
            if who == "client" and op in ("READ", "WRITE"):
                started[("fio", _field("req", rest))] = ts
            elif who == "daemon" and op == "URING_CMD":
                end(("held", user_data), "held", ts)
            elif who == "daemon" and op in IMAGE_OPS and user_data != WAKE_TAG:
                started[("image", _field("req", rest))] = ts
        elif event == "io_uring:io_uring_complete":
            who = owner.get(_field("ring", rest))
            if who == "client":
                end(("fio", _field("req", rest)), "fio", ts)
            elif who == "daemon":
                # An entry command completes with 0 when the kernel has put
                # a request into it; image I/O completes with its byte count.
                key = ("image", _field("req", rest))
                result = _field("result", rest)
                if key in started:
                    if result == EVENTFD_RESULT:
                        started.pop(key)
                    else:
                        end(key, "image", ts)
                elif result == "0" and _is_entry(_field("user_data", rest)):
                    started[("held", _field("user_data", rest))] = ts
        elif event == "fuse:fuse_request_send":
            m = _FUSE_OPCODE.search(rest)
            if m and m.group(1) in DATA_OPCODES:
                started[("fuse", _UNIQUE.search(rest).group(1))] = ts
        elif event == "fuse:fuse_request_end":
            m = _UNIQUE.search(rest)
            if m:
                end(("fuse", m.group(1)), "fuse", ts)
    spans = {name: [] for name in SPANS}
    if first_ts is None:
        return spans
    first, last = first_ts + margin_s, last_ts - margin_s
    for name, pairs in done.items():
        spans[name] = [lasted for begun, lasted in pairs if first <= begun <= last]
    if in_flight is not None:
        _count_in_flight(done["image"], first, last, in_flight)
    return spans


def _count_in_flight(pairs, first, last, in_flight):
    """Adds to `in_flight` the time within [first, last] that each number of
    the (began, lasted) `pairs` were open at once."""
    changes = sorted([(begun, 1) for begun, _ in pairs] +
                     [(begun + lasted, -1) for begun, lasted in pairs])
    open_now, since = 0, first
    for ts, change in changes:
        if ts > since:
            span = min(ts, last) - since
            if span > 0:
                in_flight[open_now] = in_flight.get(open_now, 0.0) + span
            since = max(since, ts)
        open_now += change
    if last > since:
        in_flight[open_now] = in_flight.get(open_now, 0.0) + last - since


def in_flight_shares(in_flight, bucket=4):
    """parse()'s `in_flight` times -> [(low, high, share in %)] in buckets of
    `bucket` I/Os, from none up to the most seen; [] if no time."""
    total = sum(in_flight.values())
    if total <= 0:
        return []
    top = max(in_flight) // bucket
    shares = [0.0] * (top + 1)
    for count, seconds in in_flight.items():
        shares[count // bucket] += seconds
    return [(i * bucket, i * bucket + bucket - 1, 100.0 * v / total)
            for i, v in enumerate(shares)]


def summary(values):
    """{n, mean_us, p50_us, p90_us} of a list of seconds (zeros if empty)."""
    if not values:
        return {"n": 0, "mean_us": 0.0, "p50_us": 0.0, "p90_us": 0.0}
    ordered = sorted(values)
    n = len(ordered)
    return {"n": n, "mean_us": 1e6 * sum(ordered) / n,
            "p50_us": 1e6 * ordered[n // 2],
            "p90_us": 1e6 * ordered[min(n - 1, n * 9 // 10)]}


def device_of(path):
    """The /proc/diskstats name of the block device holding `path` (its
    partition if it is on one), or None (tmpfs, overlay...)."""
    dev = os.stat(path).st_dev
    name = "%d:%d" % (os.major(dev), os.minor(dev))
    try:
        link = os.readlink("/sys/dev/block/" + name)
    except OSError:
        return None
    return os.path.basename(link)


def disk_ticks(device):
    """(I/Os completed, ms spent on them, ms the device was busy) of
    `device` from /proc/diskstats: reads and writes together; busy is
    io_ticks, the time it had at least one I/O."""
    with open("/proc/diskstats") as f:
        for line in f:
            fields = line.split()
            if len(fields) > 12 and fields[2] == device:
                return (int(fields[3]) + int(fields[7]),
                        int(fields[6]) + int(fields[10]), int(fields[12]))
    raise BenchError("%s is not in /proc/diskstats" % device)


def device_await_us(before, after):
    """Mean time per I/O in the device (the block layer's await) between two
    disk_ticks() readings, in us; 0 when it did no I/O."""
    ios, ms = after[0] - before[0], after[1] - before[1]
    return 1000.0 * ms / ios if ios else 0.0


def device_occupancy(before, after, elapsed_s):
    """(busy share in %, mean I/Os at the device) between two disk_ticks()
    readings `elapsed_s` apart. A device that a closed loop of requests
    leaves idle part of the time is busy less than 100% whatever its
    await; the mean depth is Little's law over the same interval."""
    if elapsed_s <= 0:
        return 0.0, 0.0
    ms = 1000.0 * elapsed_s
    return (100.0 * (after[2] - before[2]) / ms, (after[1] - before[1]) / ms)
