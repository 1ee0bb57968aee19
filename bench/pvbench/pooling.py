"""Pooling the rounds of several bench/compare runs into one A/B ratio per
job, and saying whether they resolve a goal.

On a noisy machine one run's rounds of a job can spread by ±20 % (each
round's ratio is taken side by side, so the spread is the machine's, not
a drift between targets); a run's median of 3-10 such rounds then moves
by ±0.1 from run to run, more than the 5 % a goal such as "≥ 0.95" asks to
tell apart. Every round of every run is still a side-by-side comparison,
so the rounds of runs of the same two targets can be pooled: their median
is the estimate, and the order statistics around it give a confidence
interval for it that needs no assumption about the noise's shape. The
interval, not the median alone, says whether the runs decide the goal."""
import math
import statistics


def round_ratios(run, target, base, job, key="iops"):
    """Per-round target / base of one bench/compare JSON report (`run`) for
    `job`; None if the run lacks the job for either target. Rounds whose
    base figure is 0 are left out."""
    rows = {(r["job"], r["target"]): r for r in run.get("rows", [])}
    a, b = rows.get((job, target)), rows.get((job, base))
    if a is None or b is None:
        return None
    return [x[key] / y[key] for x, y in zip(a["rounds"], b["rounds"])
            if y[key]]


def pair_ratios(run, target, base, job, key="iops"):
    """Per pair of consecutive rounds (1-2, 3-4, ...): the pair's summed
    target figures / its summed base figures. bench/compare runs the
    targets in ABBA order (round 1 target first, round 2 base first, ...),
    so a pair holds each order once and cancels an effect of going first
    or second (e.g. on whose writes the host's cache takes). None if the
    run lacks the job."""
    rows = {(r["job"], r["target"]): r for r in run.get("rows", [])}
    a, b = rows.get((job, target)), rows.get((job, base))
    if a is None or b is None:
        return None
    ra, rb = a["rounds"], b["rounds"]
    n = min(len(ra), len(rb)) // 2 * 2
    out = []
    for i in range(0, n, 2):
        den = rb[i][key] + rb[i + 1][key]
        if den:
            out.append((ra[i][key] + ra[i + 1][key]) / den)
    return out


def median_interval(values, confidence=0.95):
    """A distribution-free confidence interval for the median of `values`:
    (low, high), the k-th smallest and k-th largest, with the largest k for
    which the chance that the true median lies outside is at most
    1 - confidence (each value falls below the median with probability
    1/2, so the count below is Binomial(n, 1/2)). None when there are too
    few values for any such k (fewer than 6 at 95 %)."""
    xs = sorted(values)
    n = len(xs)
    tail = (1 - confidence) / 2
    cumulative = 0.0
    k = 0  # P(count below the median < k+1) stays <= tail up to here
    for i in range(n + 1):
        cumulative += math.comb(n, i) / 2 ** n
        if cumulative > tail:
            break
        k = i + 1
    if k == 0:
        return None
    return xs[k - 1], xs[n - k]


def verdict(interval, goal):
    """Whether the pooled rounds decide "ratio >= goal": 'met' when the
    whole interval is at or above it, 'not met' when it is all below,
    'not resolved' when the goal lies inside the interval or there is no
    interval."""
    if interval is None:
        return "not resolved"
    low, high = interval
    if low >= goal:
        return "met"
    if high < goal:
        return "not met"
    return "not resolved"


def pool(runs, target, base, confidence=0.95):
    """One dict per job found in any run (in the order first seen): the
    rounds and runs pooled, each run's median, the pooled median of
    per-round ratios, the median of pair ratios and the median's
    confidence interval."""
    jobs = []
    for run in runs:
        for row in run.get("rows", []):
            if row["job"] not in jobs:
                jobs.append(row["job"])
    out = []
    for job in jobs:
        pooled, pairs, per_run = [], [], []
        for run in runs:
            ratios = round_ratios(run, target, base, job)
            if not ratios:
                continue
            pooled += ratios
            pairs += pair_ratios(run, target, base, job) or []
            per_run.append(statistics.median(ratios))
        if not pooled:
            continue
        out.append({"job": job, "rounds": len(pooled), "runs": len(per_run),
                    "run_medians": per_run,
                    "median": statistics.median(pooled),
                    "pairs_median": (statistics.median(pairs)
                                     if pairs else None),
                    "interval": median_interval(pooled, confidence)})
    return out
