"""The things fio runs on, and the runner that drives one job on several of
them side by side.

A Lab is a scratch directory (in $TMPDIR) holding one raw image; from it come
the targets: Native (the image file itself), PvdiskMount (a `pvdisk mount` of
the image) and QsdExport (a qemu-storage-daemon FUSE export of the image).
Leaving the Lab's with-block -- normally, on an error or on Ctrl-C --
unmounts and stops every target and removes the directory.
"""
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from . import BenchError
from . import fio
from . import report


def mounts():
    """The mountpoints in /proc/mounts, octal escapes decoded."""
    with open("/proc/mounts") as f:
        fields = [line.split() for line in f]
    return [re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), x[1])
            for x in fields if len(x) > 1]


def mounted_under(path):
    """Mountpoints at or below `path`."""
    path = os.path.realpath(path)
    return [m for m in mounts() if m == path or m.startswith(path + "/")]


def wait_until(predicate, seconds):
    """Polls `predicate` every 50 ms for up to `seconds`; returns its last
    value."""
    deadline = time.monotonic() + seconds
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.05)
    return predicate()


def force_unmount(path):
    """Last resort for a mount its daemon did not take down: lazy unmount."""
    if mounted_under(path):
        subprocess.run(["fusermount3", "-u", "-z", path], capture_output=True)


def write_back_and_drop(path):
    """Writes `path`'s dirty pages back and drops its pages from the page
    cache, so that a target serving it with O_DIRECT finds the file as
    fio's --direct=1 fill leaves the raw image: nothing of it cached.
    Otherwise its first O_DIRECT writes go to io_uring's worker threads
    (a write over a cached page must invalidate it; measured after a
    qemu-img convert, 2026-12-05: 0.25 punts per 4 KiB write, then none
    once the pages were gone) and the kernel writes back and reclaims a
    GiB during the first jobs."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fdatasync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def last_line(text):
    """The last line of a tool's message (its error), or 'no message'."""
    lines = (text or "").strip().splitlines()
    return lines[-1] if lines else "no message"


class Target:
    """What the runner needs of a target: `file` to run fio on, `kind`,
    `flags` (pvdisk's, else None), reset() before a run, counters() after it
    (None without counters), close() at the end."""
    kind = "?"
    flags = None

    def reset(self):
        pass

    def counters(self):
        return None

    def close(self):
        pass


class Native(Target):
    """fio on the image file itself: the ceiling. No counters."""
    kind = "native"

    def __init__(self, image):
        self.file = image


class PvdiskMount(Target):
    """`pvdisk mount MNT --disk IMAGE,lock=off FLAGS`; fio runs on
    MNT/<image name>. A lab keeps several targets of one image side by side
    and runs fio on one at a time, so its mounts opt out of the image lock
    (one writer per image) that would otherwise refuse the second. A mount
    that pvdisk refuses raises BenchError with status 2 (its flags were
    wrong) and leaves nothing mounted."""
    kind = "pvdisk"

    def __init__(self, pvdisk, image, mnt, flags, disk=None, file_name=None):
        """`disk`, if given, is the whole --disk argument instead of
        IMAGE,lock=off (e.g. IMAGE,lock=off,delay=2000, or rbd:POOL/IMAGE,
        conf=...); fio then runs on the file the mount shows (`file_name`,
        or the name the stats give)."""
        self.pvdisk, self.mnt, self.flags = pvdisk, mnt, list(flags)
        os.makedirs(mnt, exist_ok=True)
        disk = disk or image + ",lock=off"
        self.disk = disk
        p = subprocess.run([pvdisk, "mount", mnt, "--disk", disk] + self.flags,
                           text=True, capture_output=True)
        if p.returncode != 0:
            raise BenchError("pvdisk mount %s refused: %s"
                             % (shlex.join(self.flags) or "(no flags)",
                                last_line(p.stderr)),
                             2 if p.returncode == 2 else 1)
        self.file = os.path.join(mnt, file_name or os.path.basename(image))
        if disk is not None and file_name is None:
            self.file = os.path.join(mnt, self.stats()["name"])
        self.pid = self._daemon_pid(p.stdout)

    def _daemon_pid(self, output):
        """The daemon's pid from the mount's output ("daemon pid N"), else
        from the mount's fsname in /proc/mounts (pvdisk-N)."""
        m = re.search(r"daemon pid ([0-9]+)", output)
        if m:
            return int(m.group(1))
        real = os.path.realpath(self.mnt)
        with open("/proc/mounts") as f:
            for line in f:
                fields = line.split()
                if fields[1] == real and fields[0].startswith("pvdisk-"):
                    return int(fields[0][len("pvdisk-"):])
        return None

    def reset(self):
        """Zeroes the counters (echo reset > MNT/stats)."""
        with open(os.path.join(self.mnt, "stats"), "w") as f:
            f.write("reset\n")

    def stats(self):
        """The first disk of MNT/stats.json: name, config, queues, total."""
        with open(os.path.join(self.mnt, "stats.json")) as f:
            return json.load(f)["disks"][0]

    def counters(self):
        return self.stats()["total"]

    def memory_kib(self):
        """The daemon's VmRSS and VmHWM (peak) in KiB, from /proc/PID/status."""
        found = {}
        try:
            with open("/proc/%d/status" % self.pid) as f:
                for line in f:
                    key, _, value = line.partition(":")
                    if key in ("VmRSS", "VmHWM"):
                        found[key] = int(value.split()[0])
        except (OSError, TypeError):
            pass
        return found

    def close(self):
        """`pvdisk unmount`; if the mount is still there, a lazy unmount."""
        subprocess.run([self.pvdisk, "unmount", self.mnt], capture_output=True,
                       timeout=120)
        force_unmount(self.mnt)


class FuseFloor(Target):
    """bench/fuse_floor: a trivial server on pvdisk's FUSE layer (zeros for
    reads, writes acknowledged, answered inline by the channel thread that
    read them) with pvdisk's FUSE settings, on channel `io` (classic or
    uring). What FUSE alone costs on this machine: the ceiling for pvdisk
    --engine null. With `image` (uring only) it serves that file instead,
    each queue thread reading and writing it on its own FUSE ring with
    O_DIRECT (or, with image "rbd:POOL/IMAGE,conf=PATH", librbd): pvdisk's
    engines behind FUSE over io_uring with no transport, the ceiling for
    pvdisk on that image. No counters."""
    kind = "floor"
    # fuse_floor's queue depth when it serves an image (pvdisk's default).
    IMAGE_QUEUE_DEPTH = 128

    def __init__(self, program, mnt, size, io="classic", image=None,
                 words=(), queue_depth=None):
        """`image` may carry ,delay=US; `words` follow it (engine=null,
        max-inflight=N, spin=held: see bench/fuse_floor.cc); `queue_depth`
        is the FUSE queue's (default IMAGE_QUEUE_DEPTH)."""
        self.mnt = os.path.abspath(mnt)
        self.io = io
        self.image = image
        os.makedirs(self.mnt, exist_ok=True)
        self.file = os.path.join(self.mnt, "disk")
        cmd = [program, self.mnt, str(size), io]
        if image:
            cmd += [str(queue_depth or self.IMAGE_QUEUE_DEPTH),
                    image if image.startswith("rbd:") else os.path.abspath(image)]
            cmd += list(words)
        self.process = subprocess.Popen(cmd,
                                        stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE, text=True)
        if not wait_until(lambda: mounted_under(self.mnt)
                          or self.process.poll() is not None, 5) or \
                self.process.poll() is not None:
            ended = self.process.poll() is not None
            why = last_line(self.process.stderr.read()) if ended else \
                "not mounted within 5 s"
            self.close()
            raise BenchError("fuse_floor did not mount: %s" % why)

    def close(self):
        """fusermount3 -u ends the server's loop; then it exits."""
        subprocess.run(["fusermount3", "-u", self.mnt], capture_output=True)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process.stderr.close()
        force_unmount(self.mnt)


class QsdExport(Target):
    """qemu-storage-daemon exporting the image over FUSE onto a file, as
    the peer of docs/PERFORMANCE.md. Paths are absolute: the daemon changes to / and
    could not unmount a relative mountpoint when it stops. locking=off, as
    the lab's pvdisk mounts take no lock: they share the image side by
    side."""
    kind = "qsd"

    def __init__(self, image, file, blockdev=None):
        """`blockdev` exports something else than the image file: the
        --blockdev options but node-name (e.g. driver=rbd,pool=...)."""
        self.file = os.path.abspath(file)
        pidfile = self.file + ".pid"
        open(self.file, "w").close()
        blockdev = blockdev or (
            "driver=file,filename=%s,aio=io_uring,cache.direct=on,locking=off"
            % os.path.abspath(image))
        cmd = ["qemu-storage-daemon", "--blockdev",
               "node-name=f," + blockdev,
               "--export", "type=fuse,id=e,node-name=f,mountpoint=%s,writable=on"
               % self.file, "--daemonize", "--pidfile", pidfile]
        self.command = cmd
        p = subprocess.run(cmd, text=True, capture_output=True)
        if p.returncode != 0 or not wait_until(lambda: mounted_under(self.file), 5):
            force_unmount(self.file)
            raise BenchError("qemu-storage-daemon did not export the image: %s"
                             % last_line(p.stderr))
        with open(pidfile) as f:
            self.pid = int(f.read().strip())

    def close(self):
        """SIGTERM, then waits for the export to go; SIGKILL and a lazy
        unmount if it does not within 10 s."""
        try:
            os.kill(self.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        alive = lambda: os.path.exists("/proc/%d" % self.pid)
        wait_until(lambda: not alive() and not mounted_under(self.file), 10)
        if alive():
            os.kill(self.pid, signal.SIGKILL)
        force_unmount(self.file)


class Remounting:
    """A target made anew before each of its runs: reset() unmounts (or
    stops) the one in use and makes another with `make`, a function of no
    arguments that returns a target the lab keeps. Everything else is the
    current target's.

    Why: two mounts of the same build, flags and image, kept mounted for a
    whole run, differed by up to 12% on one job in every round (one mount's
    state, not the order: the rounds alternate it), so a ratio of two kept
    mounts carries that offset however many rounds it has. Made anew each
    round, the offset changes from round to round and the median of the
    per-round ratios averages it out."""

    def __init__(self, the_lab, make):
        self._lab, self._make = the_lab, make
        self.current = make()

    def reset(self):
        self._lab.release(self.current)
        self.current = self._make()
        self.current.reset()

    def counters(self):
        return self.current.counters()

    def close(self):
        pass  # the lab closes the current target

    def __getattr__(self, name):
        return getattr(self.current, name)


class Lab:
    """A scratch directory with one raw image of `size` bytes, and the
    targets made from it. Use as a with-block: leaving it closes every
    target (reverse order) and removes the directory."""

    def __init__(self, build, size):
        self.build = build
        self.pvdisk = os.path.join(build, "pvdisk")
        self.size = size
        self.dir = tempfile.mkdtemp(prefix="pvbench.")
        self.image = os.path.join(self.dir, "disk0.img")
        self.targets = []
        self.made = 0  # targets made so far: each gets a name of its own
        try:
            p = subprocess.run([self.pvdisk, "create", self.image,
                                "--size", str(size)],
                               text=True, capture_output=True)
            if p.returncode != 0:
                raise BenchError("pvdisk create failed: " + last_line(p.stderr))
        except BaseException:
            self.close()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def fill(self):
        """Random data over the whole image (fio --refill_buffers)."""
        fio.fill(self.image, self.size)

    def native(self):
        return Native(self.image)

    def mount(self, flags, disk=None, pvdisk=None, image=None):
        """A new pvdisk mount of the image (or of `image`, another file)
        with these flags (or of `disk`, a whole --disk argument: see
        PvdiskMount), by the lab's build's pvdisk or the program `pvdisk`
        (another build's)."""
        mnt = os.path.join(self.dir, "mnt%d" % self._number())
        return self._keep(PvdiskMount(pvdisk or self.pvdisk,
                                      image or self.image, mnt, flags, disk))

    def qcow2(self, name, from_image=True, cluster_size=65536, options="",
              backing=False):
        """A qcow2 image in the lab's folder: the lab's image converted
        (every cluster allocated: the data is random), or with
        `from_image` False an empty one of the same virtual size (with
        `backing`, over the lab's image as its raw backing file); `options`
        are more qemu-img -o options (e.g. extended_l2=on). Its path."""
        path = os.path.join(self.dir, name)
        opts = "cluster_size=%d" % cluster_size + (
            "," + options if options else "")
        if from_image:
            cmd = ["qemu-img", "convert", "-O", "qcow2", "-o", opts,
                   self.image, path]
        else:
            cmd = ["qemu-img", "create", "-q", "-f", "qcow2", "-o", opts]
            if backing:
                cmd += ["-b", os.path.abspath(self.image), "-F", "raw"]
            cmd += [path, str(self.size)]
        p = subprocess.run(cmd, text=True, capture_output=True)
        if p.returncode != 0:
            raise BenchError("%s failed: %s" % (shlex.join(cmd),
                                                last_line(p.stderr)))
        # qemu-img reads and writes through the page cache: both files
        # leave it, as the raw image's direct fill never entered it.
        write_back_and_drop(path)
        if from_image:
            write_back_and_drop(self.image)
        return path

    def floor(self, io="classic", serve_image=False, image_options="",
              words=(), queue_depth=None):
        """A bench/fuse_floor mount as large as the image, on FUSE channel
        `io` (classic or uring); with `serve_image` (uring) serving the
        image itself rather than zeros, with `image_options` after its
        path (e.g. ',delay=2000'), fuse_floor's `words` after it (e.g.
        engine=null) and a FUSE queue of `queue_depth` entries."""
        program = os.path.join(self.build, "bench", "targets", "fuse_floor")
        mnt = os.path.join(self.dir, "floor%d" % self._number())
        image = self.image + image_options if serve_image else None
        return self._keep(FuseFloor(program, mnt, self.size, io, image,
                                    words, queue_depth))

    def qsd(self, qcow2=None, blockdev=None):
        """A qemu-storage-daemon FUSE export of the image, or of the qcow2
        image at `qcow2` (driver=qcow2 over its file, which has the raw
        export's aio=io_uring and cache.direct=on), or of `blockdev` (the
        --blockdev options but node-name, e.g. a null-co device)."""
        image = qcow2 or self.image
        file = os.path.join(self.dir, "qsd%d-%s" % (self._number(),
                                                    os.path.basename(image)))
        if qcow2:
            blockdev = ("driver=qcow2,file.driver=file,file.filename=%s,"
                        "file.aio=io_uring,file.cache.direct=on,"
                        "file.locking=off" % os.path.abspath(qcow2))
        return self._keep(QsdExport(image, file, blockdev=blockdev))

    # RBD: the same targets on an image of a Ceph cluster instead of the
    # lab's image file.
    def ceph_cluster(self, script):
        """A one-node cluster in the lab's folder (stopped on close)."""
        return self._keep(CephCluster(script, os.path.join(self.dir, "ceph")))

    def rbd_image(self, conf, name, size, tool):
        """A new RBD image rbd/NAME of `size` bytes on the cluster of
        `conf`, filled with random data and then read once, whole, through
        a pvdisk mount (closed again), removed when the lab closes. The read
        leaves the image in the OSD's cache where the cluster's cache holds
        it (scripts/ceph-cluster.sh sizes it so), so that no run is the
        first to read a block: one that is reads the OSD's disk. `tool`
        names the caller in the progress lines."""
        image = self._keep(RbdImage(conf, name, size))
        filler = self.rbd_mount(conf, name, [])
        print("%s: filling a %d MiB RBD image with random data"
              % (tool, size >> 20), file=sys.stderr)
        fio.fill(filler.file, size)
        print("%s: reading it once (into the OSD's cache)" % tool,
              file=sys.stderr)
        fio.read_all(filler.file, size)
        self.release(filler)
        return image

    def rbd_mount(self, conf, image, flags, pvdisk=None):
        """A pvdisk mount of RBD image rbd/IMAGE, by the lab's build's
        pvdisk or the program `pvdisk` (another build's)."""
        mnt = os.path.join(self.dir, "mnt%d" % self._number())
        disk = "rbd:rbd/%s,conf=%s" % (image, conf)
        return self._keep(PvdiskMount(pvdisk or self.pvdisk, None, mnt, flags,
                                      disk=disk, file_name=image))

    def rbd_qsd(self, conf, image):
        """qemu-storage-daemon's FUSE export of rbd/IMAGE (driver=rbd, from
        qemu-block-extra; cache.direct=on turns librbd's cache off)."""
        file = os.path.join(self.dir, "qsd%d-%s" % (self._number(), image))
        return self._keep(QsdExport(None, file, blockdev=(
            "driver=rbd,pool=rbd,image=%s,conf=%s,cache.direct=on"
            % (image, conf))))

    def rbd_floor(self, conf, image, size):
        """bench/fuse_floor serving rbd/IMAGE through the rbd engine."""
        program = os.path.join(self.build, "bench", "targets", "fuse_floor")
        mnt = os.path.join(self.dir, "floor%d" % self._number())
        return self._keep(FuseFloor(program, mnt, size, "uring",
                                    "rbd:rbd/%s,conf=%s" % (image, conf)))

    def rbd_bench(self, conf, image):
        return self._keep(RbdBench(conf, image))

    def fio_rbd(self, conf, image):
        """fio's own rbd engine on rbd/IMAGE, librbd's cache off."""
        return self._keep(FioRbd(conf, image, self.dir))

    def _number(self):
        """A number no earlier target of this lab had, for its folder: the
        count of live targets would, after a release, name a folder that
        another live target still uses."""
        self.made += 1
        return self.made - 1

    def _keep(self, target):
        self.targets.append(target)
        return target

    def release(self, target):
        """Unmounts or stops one target now."""
        self.targets.remove(target)
        target.close()

    def close(self):
        """Closes every target, then removes the directory -- unless
        something below it is still mounted (then it says so and keeps it).
        Ctrl-C is ignored meanwhile, so that cleanup finishes."""
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            while self.targets:
                target = self.targets.pop()
                try:
                    target.close()
                except Exception as e:  # keep closing the others
                    print("pvbench: closing %s: %s" % (target.kind, e),
                          file=sys.stderr)
            for m in mounted_under(self.dir):  # made but not yet kept
                force_unmount(m)
            left = mounted_under(self.dir)
            if left:
                print("pvbench: still mounted, kept %s: %s"
                      % (self.dir, " ".join(left)), file=sys.stderr)
            else:
                shutil.rmtree(self.dir, ignore_errors=True)
        finally:
            signal.signal(signal.SIGINT, previous)


class CephCluster:
    """A one-node Ceph cluster of scripts/ceph-cluster.sh in DIR, with a
    pool "rbd"; close() stops it and removes DIR."""
    kind = "cluster"

    def __init__(self, script, directory):
        self.script, self.dir = script, directory
        p = subprocess.run([script, "start", directory], text=True,
                           capture_output=True, timeout=300)
        if p.returncode != 0:
            raise BenchError("the Ceph cluster did not start: %s"
                             % last_line(p.stderr))
        self.conf = last_line(p.stdout)

    def close(self):
        subprocess.run([self.script, "stop", self.dir], capture_output=True,
                       timeout=120)


class RbdImage:
    """`rbd create rbd/NAME --size SIZE` (bytes) on the cluster of `conf`;
    close() removes it (on a cluster that outlives the run, --ceph-conf,
    images left behind would fill the OSD and share its cache)."""
    kind = "rbd-image"

    def __init__(self, conf, name, size):
        self.conf, self.name = conf, name
        p = subprocess.run(["rbd", "-c", conf, "create", "rbd/" + name,
                            "--size", "%dB" % size], text=True,
                           capture_output=True, timeout=120)
        if p.returncode != 0:
            raise BenchError("rbd create failed: %s" % last_line(p.stderr))

    def close(self):
        p = subprocess.run(["rbd", "-c", self.conf, "rm", "--no-progress",
                            "rbd/" + self.name], text=True,
                           capture_output=True, timeout=120)
        if p.returncode != 0:
            raise BenchError("rbd rm rbd/%s failed: %s"
                             % (self.name, last_line(p.stderr)))


class RbdBench(Target):
    """`rbd bench` on an RBD image: librbd alone, the ceiling of anything
    serving the image. It has no run time, only a byte count, so it runs
    with a large one and is stopped after `runtime` seconds; its rate is the
    operations it reported done by its last per-second line. It reports no
    latency: mean_us is Little's law (ops in flight / rate), p99_us none.
    The client cache is off, as for pvdisk and qemu's cache.direct=on."""
    kind = "rbd-bench"
    file = None

    def __init__(self, conf, image):
        self.conf, self.image = conf, image

    def command(self, job):
        """The rbd bench command of a fio job ('rw=randread bs=4k iodepth=32
        numjobs=2': every fio job of the standard matrix maps to one)."""
        opts = dict(w.split("=", 1) for w in shlex.split(job))
        rw = opts.get("rw", "read")
        threads = int(opts.get("iodepth", 1)) * int(opts.get("numjobs", 1))
        return ["rbd", "-c", self.conf, "--rbd-cache=false", "bench",
                "--io-type", "read" if rw in ("read", "randread") else "write",
                "--io-pattern", "rand" if rw.startswith("rand") else "seq",
                "--io-size", opts.get("bs", "4k").upper(),
                "--io-threads", str(threads), "--io-total", "1T",
                "rbd/" + self.image], threads

    def run_job(self, name, job, runtime):
        cmd, threads = self.command(job)
        watching = rbd_watchers(self.conf, self.image)
        busy0, total0 = fio.cpu_ticks()
        p = subprocess.Popen(cmd, text=True, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        try:
            out, err = p.communicate(timeout=runtime + 1)
        except subprocess.TimeoutExpired:
            p.terminate()
            out, err = p.communicate(timeout=30)
        busy1, total1 = fio.cpu_ticks()
        release_watchers(self.conf, self.image, watching)
        # "  SEC  OPS  OPS/SEC  BYTES/SEC" lines: seconds, ops done so far.
        lines = [l.split() for l in out.splitlines()]
        done = [(int(l[0]), int(l[1])) for l in lines
                if len(l) >= 3 and l[0].isdigit() and l[1].isdigit()]
        if not done:
            raise BenchError("rbd bench reported no progress: %s"
                             % last_line(err or out))
        seconds, ops = done[-1]
        io_size = cli_size(cmd[cmd.index("--io-size") + 1])
        iops = ops / seconds
        busy, total = busy1 - busy0, total1 - total0
        tick_us = 1e6 / os.sysconf("SC_CLK_TCK")
        return {"iops": iops, "mib_s": iops * io_size / 2**20,
                "mean_us": threads / iops * 1e6 if iops else None,
                "lat_us": None,
                "p99_us": None,
                "cpu_busy_pct": 100.0 * busy / total if total else 0.0,
                "cpu_us_per_io": busy * tick_us / ops if ops else 0.0}


def rbd_watchers(conf, image):
    """The addresses of the clients watching rbd/IMAGE (`rbd status`)."""
    p = subprocess.run(["rbd", "-c", conf, "status", "rbd/" + image,
                        "--format", "json"], text=True, capture_output=True,
                       timeout=60)
    if p.returncode != 0:
        raise BenchError("rbd status failed: %s" % last_line(p.stderr))
    return {w["address"] for w in json.loads(p.stdout).get("watchers", [])}


def release_watchers(conf, image, before):
    """Blocklists every client that started watching rbd/IMAGE since
    `before` and waits until the OSD has dropped its watch.

    `rbd bench` stopped by a signal sometimes exits without closing the
    image; its watch, and the image's exclusive lock with it, then stays
    until the OSD times the watch out (about 30 s), and the next target's
    first write waits for the lock that long (seen here: a 3 s fio run with
    no I/O done and 25 s latency). Blocklisting the dead client is what a
    lock breaker does; it frees both at once."""
    left = rbd_watchers(conf, image) - before
    for address in left:
        p = subprocess.run(["ceph", "-c", conf, "osd", "blocklist", "add",
                            address], text=True, capture_output=True,
                           timeout=60)
        if p.returncode != 0:
            raise BenchError("ceph osd blocklist add %s failed: %s"
                             % (address, last_line(p.stderr)))
    if left and not wait_until(
            lambda: not (rbd_watchers(conf, image) & left), 40):
        raise BenchError("a stopped rbd bench still watches rbd/%s" % image)


class FioRbd(Target):
    """fio's own rbd engine on an RBD image: librbd's C API reading into and
    writing from fio's buffers, no FUSE, no kernel block layer. A second
    ceiling beside `rbd bench`, which reads into librbd's own buffers and so
    never copies what it reads; this one pays the copy into a caller's
    memory that any server of the image pays (pvdisk, qemu). Its
    configuration is the cluster's with the two librbd settings pvdisk
    makes for its I/O (src/io/rbd_image.cc): no cache, and no write
    scheduler (with the cache off librbd would otherwise hold sequential
    writes back per object: 352-437 instead of 511-555 IOPS at 1 MiB QD4),
    so that pvdisk / fio-rbd is pvdisk's own cost."""
    kind = "fio-rbd"
    file = None

    def __init__(self, conf, image, directory):
        self.image = image
        self.conf = os.path.join(directory, "fio-rbd.conf")
        with open(conf) as f, open(self.conf, "w") as out:
            out.write(f.read() + "\n[client]\nrbd cache = false\n"
                      "rbd io scheduler = none\n")

    def command(self, name, job, runtime):
        return (["fio", "--name=" + name, "--ioengine=rbd",
                 "--clientname=admin", "--pool=rbd", "--rbdname=" + self.image,
                 "--time_based", "--group_reporting",
                 fio.runtime_option(runtime)] + fio.options(job))

    def run_job(self, name, job, runtime):
        return fio.run(self.command(name, job, runtime),
                       env=dict(os.environ, CEPH_CONF=self.conf))


def cli_size(text):
    """'4K' / '1M' / '128K' -> bytes."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def side_by_side(cases, job, rounds, runtime, name="job", jobfile=None,
                 progress=None, alternate=False, warmup=0, watch=None):
    """Runs one fio job on every case, one after another, `rounds` times
    (interleaved, so that the cases are compared side by side in time);
    with `alternate`, every other round in the reverse order (ABBA: a case
    does not always run right after the same one).

    With `warmup` (seconds, 0: none) a round that is not measured comes
    first: the job once on every case, `warmup` seconds each, in the first
    round's order. Why: a job's first run on a case is a little slower
    than its later ones, so whichever case ran first in the first round
    lost a little. On RBD, with the whole image in the OSD's cache
    (Lab.rbd_image reads it once), round 1 ran at 0.95 of the median of
    the later rounds without the warm-up (25 of 36 runs below it) and at
    1.03 with it (15 of 36). Before the OSD's cache held the image, a
    job's first run also missed it on every read (fio draws the same
    offsets in every run: 0 % hits and 1419 IOPS at rr4k_qd1 against
    85-100 % and 2200-2800 for the next runs), which the warm-up took
    only in part (docs/perf/rbd-cache-2026-12-06.md).

    cases: list of (label, target, extra fio options). Before each run the
    target's counters are reset; after it, its totals are read. `watch`,
    if given, is started before each run and what its stop() returns (a
    dict) goes into the run's result (e.g. osd_cache.OsdCache). Returns
    {label: [run, ...]}, a run being fio's numbers plus, for pvdisk,
    "counters" and the per-request figures of report.derive(); the warm-up
    runs are not among them. progress(label, round, run) is called after
    each run, with round None for a warm-up run."""
    runs = {label: [] for label, _, _ in cases}

    def one(target, extra, seconds):
        target.reset()
        if watch:
            watch.start()
        if hasattr(target, "run_job"):  # not fio: e.g. rbd bench
            result = target.run_job(name, job, seconds)
        else:
            result = fio.run(fio.command(name, target.file, job, seconds,
                                         jobfile, extra))
        if watch:
            result.update(watch.stop())
        counters = target.counters()
        if counters is not None:
            result["counters"] = counters
            result.update(report.derive(counters))
        return result

    if warmup:
        for label, target, extra in cases:
            result = one(target, extra, warmup)
            if progress:
                progress(label, None, result)
    for r in range(rounds):
        ordered = cases[::-1] if alternate and r % 2 == 1 else cases
        for label, target, extra in ordered:
            result = one(target, extra, runtime)
            runs[label].append(result)
            if progress:
                progress(label, r, result)
    return runs
