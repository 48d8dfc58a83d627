#!/usr/bin/env python3
"""Causal tests across seeds: reads every run's `inspect/patching.json` (and `circuits.json`)
under a sweep's output directory and prints, as markdown tables, the mean and 95% confidence
interval over seeds (Student's t) of:

  activation patching, per kind of pair and layer:
    best head      the layer's head that restores most when patched at every position
    all heads      the layer's heads' restored fractions added up (each patched alone)
    at keys / at values / at queries
                   the same, patched only at the key positions (even positions before the
                   queries), the value positions (odd ones) or the query positions
  the residual stream, per kind of pair and place: the restored fraction at the key, value
                 and query positions added up
  path patching, all of layer 0 -> all of layer 1, through each channel
  path patching head to head against composition: over every (layer-0 head, layer-1 head)
                 pair of a seed, the Pearson correlation of the K-path's restored fraction
                 with the K-composition score, and the same for Q and V
  attribution patching against exact patching: correlation over heads, worst head's error

Made for the recall task (`k1 v1 ... kn vn q1 ... qm`) and 2-layer models; `--pairs N` sets
n (default 4).

  python3 scripts/experiments/patching_across_seeds.py runs/recall-patching [--pairs 4]

Standard library only, and the intervals of `headlab sweep stats` (headlab_stats.py: the
binary must be built); the sweep report does not collect these yet.
"""

import argparse
import json
import math
import statistics
from pathlib import Path

from headlab_stats import intervals, show

CHANNELS = ["query", "key", "value"]


def estimates(rows):
    """Per row, `mean ± half-width` over the seeds that have a value ("-" where none has)."""
    name = lambda key: " / ".join(part for part in key if part)
    values = {key: [v for v in vals if v is not None] for key, vals in rows.items()}
    cells = intervals({name(key): vals for key, vals in values.items() if vals})
    return {key: show(cells[name(key)], 3) if vals else "-" for key, vals in values.items()}


def pearson(a, b):
    n = len(a)
    if n < 2:
        return None
    ma, mb = statistics.fmean(a), statistics.fmean(b)
    cov = sum((x - ma) * (y - mb) for x, y in zip(a, b))
    va = sum((x - ma) ** 2 for x in a)
    vb = sum((y - mb) ** 2 for y in b)
    return cov / math.sqrt(va * vb) if va > 0 and vb > 0 else None


def places(n_pairs):
    """Position classes of a recall sequence."""
    return {
        "at keys": lambda p: p < 2 * n_pairs and p % 2 == 0,
        "at values": lambda p: p < 2 * n_pairs and p % 2 == 1,
        "at queries": lambda p: p >= 2 * n_pairs,
    }


def section_rows(kind, section, n_pairs, rows):
    """Adds one seed's values of one kind of pair to `rows`."""
    where = places(n_pairs)
    for layer in sorted({h["layer"] for h in section["heads"]}):
        heads = [h for h in section["heads"] if h["layer"] == layer]
        whole = [h["restored"] or 0.0 for h in heads]
        measures = [("best head", max(whole)), ("all heads", sum(whole))]
        for name, keep in where.items():
            measures.append((name, sum((r or 0.0) for h in heads
                                       for p, r in enumerate(h["by_position"]) if keep(p))))
        for measure, value in measures:
            rows.setdefault(("heads", kind, f"layer {layer}", measure), []).append(value)
    for place in section["residual"]:
        label = (f"entering block {place['layer']}" if place["layer"] < len(section["residual"]) - 1
                 else "after the last block")
        for name, keep in where.items():
            value = sum((r or 0.0) for p, r in enumerate(place["by_position"]) if keep(p))
            rows.setdefault(("residual", kind, label, name), []).append(value)
    for path in section["layer_paths"]:
        label = f"L{path['sender_layer']} -> L{path['receiver_layer']}"
        rows.setdefault(("layer paths", kind, label, path["channel"]), []).append(path["restored"])
    agreement = section["attribution"]
    rows.setdefault(("attribution", kind, "", "correlation over heads"), []).append(
        agreement["correlation_heads"])
    rows.setdefault(("attribution", kind, "", "correlation over heads x positions"), []).append(
        agreement["correlation_positions"])
    rows.setdefault(("attribution", kind, "", "worst head's error"), []).append(
        agreement["worst_error"])


def composition_rows(kind, section, circuits, rows):
    """Per channel, the correlation over head pairs of path patching with composition."""
    pair = next((c for c in circuits["composition"]
                 if c["layer_a"] == 0 and c["layer_b"] == 1), None)
    if pair is None:
        return
    for channel, key in zip(CHANNELS, "qkv"):
        restored, scores = [], []
        for path in section["paths"]:
            if (path["channel"] == channel and path["sender"]["layer"] == 0
                    and path["receiver_layer"] == 1):
                restored.append(path["restored"] or 0.0)
                scores.append(pair[key][path["sender"]["head"]][path["receiver_head"]])
        rows.setdefault(("composition", kind, "L0 -> L1", channel), []).append(
            pearson(restored, scores))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", help="the sweep's output directory")
    parser.add_argument("--pairs", type=int, default=4, help="recall's n_pairs")
    args = parser.parse_args()
    rows = {}  # (table, kind, where, measure) -> values over seeds
    seeds = 0
    for path in sorted(Path(args.out).glob("*/inspect/patching.json")):
        patching = json.loads(path.read_text())
        summary = json.loads((path.parent / "summary.json").read_text())
        circuits = json.loads((path.parent / "circuits.json").read_text())
        seeds += 1
        rows.setdefault(("model", "", "", "eval token accuracy"), []).append(
            summary["eval_token_acc"])
        for kind in ["answer", "route"]:
            section = patching.get(kind)
            if section is None:
                continue
            section_rows(kind, section, args.pairs, rows)
            composition_rows(kind, section, circuits, rows)
    print(f"{seeds} seeds of {args.out}")
    cells = estimates(rows)
    table = None
    for (name, kind, where, measure) in rows:
        if name != table:
            table = name
            print(f"\n{name}\n")
            print("| pairs | where | measure | mean ± 95% CI |")
            print("| --- | --- | --- | --- |")
        print(f"| {kind} | {where} | {measure} | {cells[(name, kind, where, measure)]} |")


if __name__ == "__main__":
    main()
