"""The latency group of bench/compare: queue depth 1 and fsync-bound work,
pvdisk beside qemu-storage-daemon (and native where there is a native).

Jobs:
  delay40_qd1     4 KiB random reads at iodepth 1 on a modelled 40 us device:
                  pvdisk --engine null --disk IMG,delay=40 against qsd's
                  null-co with latency-ns=40000 (no native: there is no
                  device); fio's mean minus 40 us is the path's cost
                  (beside them floor-disk: bench/fuse_floor with the same
                  delay engine over the null engine on each FUSE queue
                  thread's ring, no transport: the path's cost without
                  pvdisk's transport)
  null_qd1        the same with no device latency: pvdisk --engine null
                  against qsd's null-co (both near FUSE's own round trip),
                  and bench/fuse_floor on the uring channel (floor-uring: a
                  server that answers each read at once with zeros, on
                  pvdisk's FUSE layer; FUSE's own round trip on this
                  machine, which no FUSE disk's path can go below)
  wr4k_fsync_qd1  4 KiB random writes at iodepth 1 with an fsync after each
                  (fio --fsync=1) on the image
  sqlite_buffered sqlite commits per second (WAL, synchronous=FULL, one
                  1 KiB row per commit) on ext4 on a buffered loop device
                  over the target's disk file (sqlite_commits.py)
  sqlite_direct   the same over a loop device with --direct-io=on
The image jobs use the run's image targets, floor-disk among them where
chosen (bench/fuse_floor serving the image through pvdisk's uring engine,
fsync included, with no transport: FUSE over io_uring's own ceiling on that
image); the modelled ones mount their own pvdisk (and pvdisk-base), qsd
and floor-uring for the job and release them after.
"""
import shlex
import sys

from . import fio
from . import lab
from . import sqlite_commits

QD1_READ = "rw=randread bs=4k iodepth=1"
DELAY_US = 40

# job -> (device, fio options or None for the sqlite jobs, direct-io loop)
JOBS = {
    "delay40_qd1": ("delay", QD1_READ, None),
    "null_qd1": ("null", QD1_READ, None),
    "wr4k_fsync_qd1": ("image", "rw=randwrite bs=4k iodepth=1 fsync=1", None),
    "sqlite_buffered": ("image", None, False),
    "sqlite_direct": ("image", None, True),
}
TARGETS = ["native", "pvdisk", "pvdisk-base", "qsd", "floor-uring",
           "floor-disk"]
# The FUSE floors: floor-uring on the null device's job (answering at
# once, it has no device to model), floor-disk on the image jobs and, with
# the null engine and the same delay, on the modelled device's.
FLOOR = "floor-uring"
FLOOR_DISK = "floor-disk"
# The modelled devices: pvdisk's --disk options and engine, qsd's blockdev.
MODELLED = {
    "delay": (",delay=%d" % DELAY_US,
              "driver=null-co,size=%d,latency-ns=%d,read-zeroes=on"),
    "null": ("", "driver=null-co,size=%d,read-zeroes=on"),
}


def modelled_targets(the_lab, device, names, pvdisk_flags, base_pvdisk):
    """Mounts the modelled `device` ("delay" or "null") for the targets among
    `names` but native -> {name: target}, in TARGETS order."""
    disk_extra, blockdev = MODELLED[device]
    disk = the_lab.image + ",lock=off" + disk_extra
    flags = ["--engine", "null"] + list(pvdisk_flags)
    made = {}
    for name in [n for n in TARGETS if n in names and n != "native"]:
        if name == FLOOR:
            if device == "null":
                made[name] = the_lab.floor("uring")
        elif name == FLOOR_DISK:
            if device == "delay":
                # The same delay engine on the FUSE queue thread's ring,
                # nothing of pvdisk's transport around it.
                made[name] = the_lab.floor("uring", serve_image=True,
                                           image_options=",delay=%d" % DELAY_US,
                                           words=["engine=null"])
        elif name == "qsd":
            values = ((the_lab.size, DELAY_US * 1000) if device == "delay"
                      else (the_lab.size,))
            made[name] = the_lab.qsd(blockdev=blockdev % values)
        else:
            made[name] = the_lab.mount(
                flags, disk=disk,
                pvdisk=base_pvdisk if name == "pvdisk-base" else None)
    return made


class SqliteRun:
    """A target seen through sqlite on a loop device over its disk file
    (side_by_side's run_job interface): commits per second as "iops", the
    mean time of a commit as "mean_us"."""

    def __init__(self, target, direct_io):
        self.target, self.direct_io = target, direct_io
        self.kind, self.file = target.kind, target.file

    def reset(self):
        self.target.reset()

    def counters(self):
        return self.target.counters()

    def run_job(self, name, job, runtime):
        busy0, total0 = fio.cpu_ticks()
        try:
            rate = sqlite_commits.on_loop(self.file, runtime, self.direct_io)
        except RuntimeError as e:
            # A filesystem the target cannot hold (mkfs or mount failed):
            # a run of 0 commits, said on stderr, and the others go on.
            print("%s on %s: %s" % (name, self.kind, e), file=sys.stderr)
            rate = 0.0
        busy1, total1 = fio.cpu_ticks()
        total = total1 - total0
        return {"iops": rate,
                "mib_s": rate * sqlite_commits.ROW_BYTES / (1 << 20), "mean_us": 1e6 / rate if rate else None,
                "p99_us": None, "lat_us": None,
                "cpu_busy_pct": 100.0 * (busy1 - busy0) / total if total else 0.0,
                "cpu_us_per_io": None}


def measure(the_lab, jobs, image_targets, names, args, progress):
    """Runs the latency jobs -> {job: (runs, command)}; runs as
    lab.side_by_side's, on the image targets or the modelled ones."""
    out = {}
    base_pvdisk = (args.base_build + "/pvdisk") if args.base_build else None
    for job in jobs:
        device, options, direct_io = JOBS[job]
        made = None
        if device == "image":
            targets = {n: t for n, t in image_targets.items() if n != FLOOR}
        else:
            made = modelled_targets(the_lab, device, names, args.pvdisk_flags,
                                    base_pvdisk)
            targets = made
        try:
            if options is None:
                cases = [(n, SqliteRun(t, direct_io), "")
                         for n, t in targets.items()]
                command = sqlite_commits.command(direct_io)
            else:
                cases = [(n, t, "") for n, t in targets.items()]
                command = shlex.join(fio.command(job, "TARGET", options,
                                                 args.runtime)
                                     + ["--output-format=json"])
            runs = lab.side_by_side(cases, options, args.rounds, args.runtime,
                                    name=job, progress=progress(job),
                                    alternate=True)
        finally:
            for target in (made or {}).values():
                the_lab.release(target)
        if device != "image":
            disk_extra, blockdev = MODELLED[device]
            command += ("  (pvdisk: pvdisk mount MNT --engine null --disk "
                        "IMG%s; qsd: --blockdev node-name=f,%s)"
                        % (disk_extra, blockdev % (
                            (the_lab.size, DELAY_US * 1000)
                            if device == "delay" else (the_lab.size,))))
        out[job] = (runs, command)
    return out
