#!/usr/bin/env python3
"""pvlab: run fio against pvdisk mounts of different configurations, side by
side in one run, and print fio's numbers next to pvdisk's counters.

Used by the scripts in examples/ and bench/; also usable on its own:

  examples/pvlab.py --build build --job "rw=randread bs=4k iodepth=32 numjobs=2" \
      --config "q1: --queues 1" --config "q4: --queues 4" --rounds 3

Each --config is "NAME: pvdisk mount flags [@ extra fio options]"; the special
flags "native" run the job on the image file itself. Ratios are quoted against
the first config. --job takes fio options without dashes; --jobfile a fio job
file (its ${VARS} come from the environment, e.g. BS=4k QD=32).
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile

# Counters shown by default next to fio's numbers (per FUSE request where
# that reads better).
DEFAULT_COUNTERS = ["reqs_read", "reqs_write", "sectors_read", "sectors_written",
                    "merges_read", "merges_write", "splits", "indirect_reqs",
                    "inflight_max",
                    "engine_inflight_max", "kicks_sent", "kicks_suppressed",
                    "irqs_sent", "irqs_suppressed", "grant_maps"]


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, text=True, capture_output=True, **kw)


class Lab:
    def __init__(self, build, image_size="1G", workdir=None, fill=True):
        self.pvdisk = os.path.join(build, "pvdisk")
        self.dir = workdir or tempfile.mkdtemp(prefix="pvlab.")
        self.image = os.path.join(self.dir, "disk0.img")
        self.mnt = os.path.join(self.dir, "mnt")
        os.makedirs(self.mnt, exist_ok=True)
        if not os.path.exists(self.image):
            run([self.pvdisk, "create", self.image, "--size", image_size])
            if fill:  # random data, so reads hit allocated blocks, not holes
                run(["fio", "--name=fill", "--filename=" + self.image,
                     "--rw=write", "--bs=1m", "--direct=1",
                     "--ioengine=io_uring", "--refill_buffers",
                     "--size=" + image_size, "--output-format=terse"])
        self.mounted = False

    def mount(self, flags):
        run([self.pvdisk, "mount", self.mnt, "--disk", self.image] + flags)
        self.mounted = True

    def unmount(self):
        if self.mounted:
            run([self.pvdisk, "unmount", self.mnt])
            self.mounted = False

    def target(self, native):
        return self.image if native else os.path.join(self.mnt, "disk0.img")

    def reset_stats(self):
        with open(os.path.join(self.mnt, "stats"), "w") as f:
            f.write("reset\n")

    def stats(self):
        with open(os.path.join(self.mnt, "stats.json")) as f:
            return json.load(f)["disks"][0]

    def fio(self, job, native, runtime, extra="", jobfile=None):
        args = ["fio"]
        if jobfile:
            args.append(jobfile)
        else:
            args.append("--name=job")
        args += ["--filename=" + self.target(native),
                 "--ioengine=io_uring", "--direct=1", "--time_based",
                 "--runtime=%s" % runtime, "--group_reporting",
                 "--output-format=json"]
        args += ["--" + word for word in shlex.split(job)]
        args += ["--" + word for word in shlex.split(extra)]
        out = json.loads(run(args).stdout)["jobs"][0]
        read, write = out["read"], out["write"]
        iops = read["iops"] + write["iops"]
        mib_s = (read["bw_bytes"] + write["bw_bytes"]) / 2**20
        lat = [d["clat_ns"] for d in (read, write) if d["io_bytes"] > 0]
        mean_us = lat[0]["mean"] / 1000 if lat else 0
        p99_us = lat[0].get("percentile", {}).get("99.000000", 0) / 1000 if lat else 0
        return {"iops": iops, "mib_s": mib_s, "mean_us": mean_us, "p99_us": p99_us}

    def cleanup(self):
        self.unmount()
        subprocess.run(["rm", "-rf", self.dir])


def compare(lab, job, configs, rounds, runtime, counters, jobfile=None):
    """configs: list of (name, flags or None for native, extra fio options).
    Returns one row per config."""
    results = {name: [] for name, _, _ in configs}
    totals = {}
    for _ in range(rounds):
        for name, flags, extra in configs:
            native = flags is None
            if not native:
                lab.mount(flags)
                lab.reset_stats()
            try:
                results[name].append(
                    lab.fio(job, native, runtime, extra, jobfile))
                if not native:
                    totals[name] = lab.stats()["total"]
            finally:
                if not native:
                    lab.unmount()
    rows = []
    base = None
    for name, flags, _ in configs:
        runs = results[name]
        iops = statistics.median(r["iops"] for r in runs)
        row = {"config": name,
               "flags": "native" if flags is None else " ".join(flags),
               "iops": iops,
               "mib_s": statistics.median(r["mib_s"] for r in runs),
               "mean_us": statistics.median(r["mean_us"] for r in runs),
               "p99_us": statistics.median(r["p99_us"] for r in runs)}
        if base is None:
            base = iops
        row["ratio"] = iops / base if base else 0
        total = totals.get(name, {})
        fuse = total.get("fuse_reads", 0) + total.get("fuse_writes", 0)
        reqs = total.get("reqs_read", 0) + total.get("reqs_write", 0)
        sectors = total.get("sectors_read", 0) + total.get("sectors_written", 0)
        row["ring_reqs_per_fuse"] = reqs / fuse if fuse else 0
        row["avg_req_kib"] = sectors * 512 / 1024 / reqs if reqs else 0
        row["kicks_per_req"] = total.get("kicks_sent", 0) / reqs if reqs else 0
        row["irqs_per_req"] = total.get("irqs_sent", 0) / reqs if reqs else 0
        for c in counters:
            row[c] = total.get(c, "")
        rows.append(row)
    return rows


def markdown(rows, columns):
    def fmt(v):
        if isinstance(v, float):
            return "%.2f" % v if abs(v) < 100 else "%.0f" % v
        return str(v)
    lines = ["| " + " | ".join(columns) + " |",
             "|" + "---|" * len(columns)]
    for row in rows:
        lines.append("| " + " | ".join(fmt(row.get(c, "")) for c in columns) + " |")
    return "\n".join(lines)


BASE_COLUMNS = ["config", "iops", "mib_s", "mean_us", "p99_us", "ratio",
                "ring_reqs_per_fuse", "avg_req_kib", "kicks_per_req",
                "irqs_per_req"]


def parse_config(text):
    name, _, rest = text.partition(":")
    flags, _, extra = rest.partition("@")
    flags = flags.strip()
    return (name.strip(), None if flags == "native" else shlex.split(flags),
            extra.strip())


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default="build")
    p.add_argument("--job", default="",
                   help="fio options without dashes, e.g. 'rw=randread bs=4k iodepth=32'")
    p.add_argument("--jobfile", help="a fio job file instead of (or with) --job")
    p.add_argument("--config", action="append", required=True,
                   help="NAME: pvdisk mount flags, or NAME: native")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--runtime", default="5")
    p.add_argument("--image-size", default="1G")
    p.add_argument("--counters", default=",".join(DEFAULT_COUNTERS))
    p.add_argument("--json", help="also write the rows to this file")
    args = p.parse_args()
    counters = [c for c in args.counters.split(",") if c]
    lab = Lab(args.build, args.image_size)
    try:
        rows = compare(lab, args.job, [parse_config(c) for c in args.config],
                       args.rounds, args.runtime, counters, args.jobfile)
    finally:
        lab.cleanup()
    print("fio: " + " ".join(x for x in (args.jobfile, args.job) if x))
    print(markdown(rows, BASE_COLUMNS + counters))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
