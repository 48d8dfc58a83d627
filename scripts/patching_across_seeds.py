#!/usr/bin/env python3
"""Activation patching across seeds: reads every run's `inspect/patching.json` under a
sweep's output directory and prints, per layer, the restored fraction of the clean logit
difference (mean and 95% confidence interval over seeds, Student's t) for:

  best head      the layer's head that restores most when patched at every position
  all heads      the layer's heads' restored fractions added up (each patched alone)
  at values      the layer's heads patched at the value positions only (odd positions
                 before the queries: where the corrupted token sits), added up
  at queries     the same at the query positions (where the answers are read)

Made for the recall task (`k1 v1 ... kn vn q1 ... qm`); `--pairs N` sets n (default 4).

  python3 scripts/patching_across_seeds.py runs/recall-patching [--pairs 4]

Standard library only; the sweep report does not collect these yet.
"""

import argparse
import json
import math
import statistics
from pathlib import Path

# Two-sided 95% Student's t quantiles by degrees of freedom (1..30); 1.96 beyond.
T95 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
       2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
       2.060, 2.056, 2.052, 2.048, 2.045, 2.042]


def estimate(values):
    n = len(values)
    mean = statistics.fmean(values)
    if n < 2:
        return f"{mean:.3f}"
    t = T95[n - 2] if n - 1 <= len(T95) else 1.96
    half = t * statistics.stdev(values) / math.sqrt(n)
    return f"{mean:.3f} ± {half:.3f}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", help="the sweep's output directory")
    parser.add_argument("--pairs", type=int, default=4, help="recall's n_pairs")
    args = parser.parse_args()
    values = {p for p in range(1, 2 * args.pairs, 2)}
    rows = {}  # (layer, measure) -> values over seeds
    seeds = 0
    for path in sorted(Path(args.out).glob("*/inspect/patching.json")):
        patching = json.loads(path.read_text())
        summary = json.loads((path.parent / "summary.json").read_text())
        seeds += 1
        rows.setdefault(("model", "eval token accuracy"), []).append(summary["eval_token_acc"])
        layers = sorted({h["layer"] for h in patching["heads"]})
        for layer in layers:
            heads = [h for h in patching["heads"] if h["layer"] == layer]
            whole = [h["restored"] or 0.0 for h in heads]
            at = lambda keep: sum((r or 0.0) for h in heads
                                  for p, r in enumerate(h["by_position"]) if keep(p))
            for measure, value in [
                ("best head", max(whole)),
                ("all heads", sum(whole)),
                ("at values", at(lambda p: p in values)),
                ("at queries", at(lambda p: p >= 2 * args.pairs)),
            ]:
                rows.setdefault((f"layer {layer}", measure), []).append(value)
    print(f"{seeds} seeds of {args.out}\n")
    print("| | | mean ± 95% CI |")
    print("| --- | --- | --- |")
    for (where, measure), vals in rows.items():
        print(f"| {where} | {measure} | {estimate(vals)} |")


if __name__ == "__main__":
    main()
