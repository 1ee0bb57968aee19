"""Turning runs into reports: per-request figures from pvdisk's counters,
medians and side-by-side ratios over rounds, markdown tables, JSON files and
gnuplot PNGs."""
import json
import os
import shutil
import statistics
import subprocess

FIO_FIELDS = ["iops", "mib_s", "mean_us", "p99_us", "lat_us", "cpu_busy_pct",
              "cpu_us_per_io"]
DERIVED_FIELDS = ["ring_reqs_per_fuse", "avg_req_kib", "kicks_per_req",
                  "irqs_per_req"]


def derive(total):
    """Per-request figures from a stats.json total row: ring requests per
    FUSE request (below 1 = merging), average ring request in KiB (sectors
    / requests), kicks and interrupts per ring request."""
    fuse = total.get("fuse_reads", 0) + total.get("fuse_writes", 0)
    reqs = total.get("reqs_read", 0) + total.get("reqs_write", 0)
    sectors = total.get("sectors_read", 0) + total.get("sectors_written", 0)
    per_req = lambda n: n / reqs if reqs else 0.0
    return {"ring_reqs_per_fuse": reqs / fuse if fuse else 0.0,
            "avg_req_kib": per_req(sectors * 512 / 1024),
            "kicks_per_req": per_req(total.get("kicks_sent", 0)),
            "irqs_per_req": per_req(total.get("irqs_sent", 0))}


def median(values):
    """Median of the values that are not None; None if there are none."""
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def ratio(runs, base_runs, key="iops"):
    """Median over rounds of runs[i][key] / base_runs[i][key]: a ratio taken
    side by side in each round, then the median."""
    pairs = zip(runs, base_runs or [])
    return median([a[key] / b[key] for a, b in pairs if b[key]])


def summarize(runs, ratios=None, counters=(), label="config"):
    """One row per label of side_by_side()'s {label: [run, ...]}: medians of
    fio's numbers and the per-request figures, ratio columns (column ->
    label of the base; a missing base gives None) and the medians of the
    named counters (None where the target has none)."""
    rows = []
    for name, rs in runs.items():
        row = {label: name}
        for key in FIO_FIELDS + DERIVED_FIELDS:
            row[key] = median(r.get(key) for r in rs)
        for column, base in (ratios or {}).items():
            row[column] = ratio(rs, runs.get(base))
        for c in counters:
            row[c] = median(r.get("counters", {}).get(c) for r in rs)
        rows.append(row)
    return rows


def median_counters(runs):
    """Median of each numeric counter over the runs; None for a target
    without counters. A counter that is not a number (the latency
    histograms, lists of buckets) has no median: the last run's is kept
    (an even number of rounds would otherwise average two lists)."""
    if "counters" not in runs[0]:
        return None
    merged = {}
    for k, first in runs[0]["counters"].items():
        if isinstance(first, (int, float)):
            merged[k] = median(r["counters"][k] for r in runs)
        else:
            merged[k] = runs[-1]["counters"][k]
    return merged


def fmt(value):
    """A cell: None as '-', floats with 2 decimals below 100, else whole."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return "%.2f" % value if abs(value) < 100 else "%.0f" % value
    return str(value)


def markdown(rows, columns):
    """A markdown table of `rows` (dicts) with these columns."""
    lines = ["| " + " | ".join(columns) + " |",
             "| " + " | ".join("---" for _ in columns) + " |"]
    for row in rows:
        lines.append("| " + " | ".join(fmt(row.get(c)) for c in columns) + " |")
    return "\n".join(lines)


def write(path, text):
    """Writes a text file, making its folder."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def write_json(path, data):
    write(path, json.dumps(data, indent=1) + "\n")


PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def plot(path, title, xlabel, ylabel, series, logx=False):
    """A line plot as PNG with gnuplot: series is {curve name: [(x, y), ...]}.
    Writes PATH (.png) and the gnuplot script beside it (.gp). Tries the
    pngcairo terminal, then png (libgd). Returns None, or why no PNG."""
    if not shutil.which("gnuplot"):
        return "gnuplot not found (scripts/install-deps.sh installs gnuplot-nox)"
    blocks, plots = [], []
    for i, (name, points) in enumerate(series.items()):
        blocks.append("$d%d << EOD\n%s\nEOD" % (
            i, "\n".join("%g %g" % p for p in points)))
        plots.append("$d%d with linespoints title %s" % (i, json.dumps(name)))
    body = "\n".join(blocks + [
        "set output %s" % json.dumps(os.path.abspath(path)),
        "set title %s" % json.dumps(title),
        "set xlabel %s" % json.dumps(xlabel),
        "set ylabel %s" % json.dumps(ylabel),
        "set grid", "set key outside right", "set yrange [0:*]",
        "set logscale x 2" if logx else "unset logscale x",
        "plot " + ", ".join(plots), ""])
    write(os.path.splitext(path)[0] + ".gp",
          "set terminal pngcairo size 1000,600\n" + body)
    for terminal in ("pngcairo size 1000,600", "png size 1000,600"):
        p = subprocess.run(["gnuplot"], input="set terminal %s\n%s"
                           % (terminal, body), text=True, capture_output=True)
        if p.returncode == 0 and is_png(path):
            return None
    return "gnuplot failed: " + (p.stderr.strip().splitlines() or ["?"])[-1]


def is_png(path):
    """The file exists and starts with the PNG signature."""
    try:
        with open(path, "rb") as f:
            return f.read(8) == PNG_MAGIC
    except OSError:
        return False
