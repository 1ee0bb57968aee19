#!/usr/bin/env python3
"""pvlab: run fio against pvdisk mounts of different configurations, side by
side in one run, and print fio's numbers next to pvdisk's counters.

Used by the scripts in examples/; also usable on its own:

  examples/pvlab.py --build build --job "rw=randread bs=4k iodepth=32 numjobs=2" \
      --config "q1: --queues 1" --config "q4: --queues 4" --rounds 3
  examples/pvlab.py --matrix --config "native: native" --config "virtio: --frontend virtio"

Each --config is "NAME: pvdisk mount flags [@ extra fio options]"; the special
flags "native" run the job on the image file itself. Every config is mounted
once; the job runs on them one after another, --rounds times, and rows are
medians. Ratios are quoted against the first config. --job takes fio options
without dashes; --jobfile a fio job file (its ${VARS} come from the
environment, e.g. BS=4k QD=32); --matrix runs the standard matrix of
docs/PERFORMANCE.md (or the listed jobs of it), one table per job.
The mounts, fio runs, medians and tables are bench/pvbench's, shared with
bench/compare and bench/experiments.
"""
import os
import shlex
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)),
                                "..", "bench"))
from pvbench import cli, fio, lab, report  # noqa: E402

# Counters shown by default next to fio's numbers.
DEFAULT_COUNTERS = ["reqs_read", "reqs_write", "sectors_read", "sectors_written",
                    "merges_read", "merges_write", "splits", "indirect_reqs",
                    "inflight_max",
                    "engine_inflight_max", "kicks_sent", "kicks_suppressed",
                    "irqs_sent", "irqs_suppressed", "grant_maps"]

BASE_COLUMNS = ["config", "iops", "mib_s", "mean_us", "p99_us", "ratio",
                "ring_reqs_per_fuse", "avg_req_kib", "kicks_per_req",
                "irqs_per_req"]


def parse_config(text):
    """'NAME: flags @ extra fio options' -> (name, flags or None, extra)."""
    name, _, rest = text.partition(":")
    flags, _, extra = rest.partition("@")
    flags = flags.strip()
    return (name.strip(), None if flags == "native" else shlex.split(flags),
            extra.strip())


def compare(cases, job, rounds, runtime, counters, jobfile=None, name="job"):
    """cases: list of (config name, target, extra fio options). Returns one
    row per config: medians, ratio to the first, counters."""
    runs = lab.side_by_side(cases, job, rounds, runtime, name=name,
                            jobfile=jobfile)
    rows = report.summarize(runs, ratios={"ratio": cases[0][0]},
                            counters=counters)
    for row, (_, target, _) in zip(rows, cases):
        row["flags"] = "native" if target.flags is None else " ".join(target.flags)
    return rows


def main():
    p = cli.Parser(prog="pvlab", description=__doc__,
                   formatter_class=cli.argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default="build")
    p.add_argument("--job", default="",
                   help="fio options without dashes, e.g. 'rw=randread bs=4k iodepth=32'")
    p.add_argument("--jobfile", help="a fio job file instead of (or with) --job")
    p.add_argument("--matrix", nargs="?", const=",".join(fio.MATRIX),
                   type=cli.one_of(list(fio.MATRIX)),
                   help="run the standard matrix (or these jobs of it) instead of --job")
    p.add_argument("--config", action="append", required=True,
                   help="NAME: pvdisk mount flags, or NAME: native")
    p.add_argument("--rounds", type=cli.positive_int, default=1)
    p.add_argument("--runtime", type=cli.positive_number, default=5)
    p.add_argument("--image-size", type=cli.image_size, default="1G")
    p.add_argument("--counters", default=",".join(DEFAULT_COUNTERS))
    p.add_argument("--json", help="also write the rows to this file")
    args = p.parse_args()
    counters = [c for c in args.counters.split(",") if c]
    configs = [parse_config(c) for c in args.config]
    jobs = ([(j, fio.MATRIX[j]) for j in args.matrix] if args.matrix
            else [("job", args.job)])
    cli.check_tools("pvlab", args.build, [("fio", "fio")])

    def body():
        results = {}
        with lab.Lab(args.build, args.image_size) as the_lab:
            cases = [(n, the_lab.native() if flags is None else the_lab.mount(flags), extra)
                     for n, flags, extra in configs]
            the_lab.fill()
            for name, job in jobs:
                rows = compare(cases, job, args.rounds, args.runtime, counters,
                               args.jobfile, name)
                results[name] = rows
                if args.matrix:
                    print("### %s" % name)
                print("fio: " + " ".join(x for x in (args.jobfile, job) if x))
                print(report.markdown(rows, BASE_COLUMNS + counters))
                if args.matrix:
                    print(flush=True)
        if args.json:
            report.write_json(args.json, results if args.matrix
                              else results["job"])
    cli.main("pvlab", body)


if __name__ == "__main__":
    sys.exit(main())
