"""What bench/experiments' mounts serve: the device under the transport.

A Device is a --disk argument (IMAGE in it stands for the lab's image) and
mount flags added to every configuration, plus whether it is *slow*: a
device whose cost is latency per request (a network store, a remote disk),
on which the experiments run the shapes that show the seed phenomena (see
bench/experiments). On a slow device each experiment may also pick its own
--disk (e.g. its own delay), so that the phenomenon is visible there.

  local       the lab's image through the default engine (io_uring): this
              machine's fast local disk
  null-delay  the null engine (no I/O) with a completion delay per
              experiment (--disk IMAGE,delay=US): a remote disk's latency
              without its bandwidth; CPU-light, so short runs mean something
              on a loaded machine
  rbd         an RBD image (the rbd engine) on a one-node Ceph cluster that
              scripts/ceph-cluster.sh starts in the lab's folder for the run
              and stops after it; the image is filled with random data
              through a pvdisk mount first and read once, so that the OSD
              serves reads from its cache. Its cost per request is a
              network round trip to an OSD on this same machine.
  custom      --disk SPEC [--device-flags FLAGS]: anything pvdisk mounts,
              e.g. an RBD image of a cluster already running:
              --disk rbd:rbd/bench,conf=/path/ceph.conf

Adding a device means adding a Device below (prepare() sets up what it
serves); the experiments need no change.
"""
import os
import shlex
import sys

from . import cli

CEPH_CLUSTER_SCRIPT = os.path.join(cli.REPO, "scripts", "ceph-cluster.sh")

# The null-delay device's delay per experiment, in microseconds, and why.
# Each is chosen so that the fastest configuration of the experiment moves
# at most ~5K IOPS (or ~200 MiB/s): far below what this 2-core machine
# carries on the null engine even while loaded, so the delay, not the CPU,
# sets the pace, and the ratios are those of a latency-bound device of any
# latency (IOPS = requests in flight / delay).
NULL_DELAY_US = {
    # up to 8 queues x 32 slots = 256 in flight: 256 / 50 ms = 5.1K IOPS
    "queues": 50_000,
    # up to 1024 in flight: 1024 / 200 ms = 5.1K IOPS
    "depth": 200_000,
    # up to 4 MiB in flight (4 x 1 MiB): 4 MiB / 20 ms = 200 MiB/s
    "request-size": 20_000,
}


class Device:
    """name, the --disk template (IMAGE = the lab's image, None = the lab's
    default), flags added to every mount, slow (run the slow-device
    shapes), delays (experiment -> us, for `null-delay`), fill (whether the
    lab's image must hold data: the null engine never reads it)."""

    def __init__(self, name, disk=None, flags=(), slow=False, delays=None,
                 fill=True):
        self.name, self.disk, self.flags = name, disk, list(flags)
        self.slow, self.delays, self.fill = slow, delays or {}, fill
        self.filled = fill  # whether what the mounts read holds random data

    def disk_for(self, experiment, image):
        """The --disk argument for `experiment`'s mounts, or None for the
        lab's default (IMAGE,lock=off)."""
        template = self.disk
        if experiment in self.delays:
            template = "IMAGE,delay=%d" % self.delays[experiment]
        if template is None:
            return None
        disk = template.replace("IMAGE", image)
        # The lab mounts several configurations of one image side by side.
        if "IMAGE" in template and "lock=" not in template:
            disk += ",lock=off"
        return disk

    def describe(self, experiment):
        """One line for the report."""
        disk = self.disk
        if experiment in self.delays:
            disk = "IMAGE,delay=%d" % self.delays[experiment]
        parts = ["device `%s`" % self.name]
        if disk:
            parts.append("--disk `%s`" % disk)
        if self.flags:
            parts.append("flags `%s`" % shlex.join(self.flags))
        return ", ".join(parts)

    def supports(self, experiment):
        """A device with per-experiment delays runs only those."""
        return not self.delays or experiment in self.delays

    def tools(self):
        """(program, Debian package) pairs the device needs besides fio."""
        return []

    def prepare(self, the_lab, size):
        """Makes what the mounts will serve, in `the_lab` (closed with it):
        here, random data over the lab's image if the device reads it."""
        if self.fill:
            print("experiments: filling a %d MiB image with random data"
                  % (size >> 20), file=sys.stderr)
            the_lab.fill()


class RbdDevice(Device):
    """An RBD image of a one-node cluster started for the run."""

    def __init__(self, device_flags=()):
        super().__init__("rbd", flags=device_flags, slow=True, fill=False)
        self.filled = True  # prepare() fills the RBD image (not the lab's)

    def tools(self):
        return [("rbd", "ceph-common"), ("ceph-mon", "ceph-mon"),
                ("ceph-osd", "ceph-osd")]

    def prepare(self, the_lab, size):
        conf = the_lab.ceph_cluster(CEPH_CLUSTER_SCRIPT).conf
        image = "experiments-%d" % os.getpid()
        the_lab.rbd_image(conf, image, size, "experiments")
        self.disk = "rbd:rbd/%s,conf=%s" % (image, conf)


def named(name, disk=None, device_flags=""):
    """The device for --device NAME (or --disk SPEC: custom)."""
    if disk is not None:
        return Device("custom", disk, shlex.split(device_flags), slow=True,
                      fill="IMAGE" in disk)
    if name == "rbd":
        return RbdDevice(shlex.split(device_flags))
    if name == "null-delay":
        return Device("null-delay", flags=["--engine", "null"], slow=True,
                      delays=NULL_DELAY_US, fill=False)
    return Device("local", flags=shlex.split(device_flags))


NAMES = ["local", "null-delay", "rbd"]
