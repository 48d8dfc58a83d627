#!/usr/bin/env python3
"""Summarises the runs of scripts/experiments.sh: markdown tables on stdout and in
DOCS/results.md, and the figures the README shows copied into DOCS/.

Usage: summarise_experiments.py RUNS_DIR DOCS_DIR   (standard library only)
"""
import csv
import json
import shutil
import sys
from pathlib import Path


def metrics(run):
    records = [json.loads(l) for l in open(run / "metrics.jsonl") if l.strip()]
    evals = [r for r in records if "eval_token_acc" in r]
    last = evals[-1]
    to_99 = next((r["step"] for r in evals if r["eval_token_acc"] >= 0.99), None)
    return {
        "acc": last["eval_token_acc"],
        "seq_acc": last["eval_seq_acc"],
        "steps": records[-1]["step"],
        "to_99": to_99,
        "seconds": records[-1]["elapsed_s"],
    }


def heads(run):
    return json.load(open(run / "inspect" / "heads.json"))


def divergence(run):
    with open(run / "inspect" / "divergence.csv") as f:
        return [{k: float(v) for k, v in row.items()} for row in csv.DictReader(f)]


def first_divergence(rows, tolerance=1e-4):
    """First snapshot step at which the heads' QK circuits are no longer identical."""
    for row in rows:
        if row["qk_cosine"] < 1 - tolerance:
            return int(row["step"])
    return None


def pct(x):
    return f"{100 * x:.2f}%"


def roles(run):
    return ", ".join(h["role"] for h in heads(run))


def symmetry_table(runs):
    lines = [
        "| arm | eval token acc | steps to 99% | QK cosine (end) | OV cosine (end) "
        "| pattern JS (end) | heads first differ at step | roles |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for arm in ["random", "symmetric", "symmetric-dropout"]:
        run = runs / f"symmetry-{arm}"
        m, rows = metrics(run), divergence(run)
        end = rows[-1]
        first = first_divergence(rows)
        first = "never" if first is None else str(first)
        to_99 = "not reached" if m["to_99"] is None else str(m["to_99"])
        lines.append(
            f"| {arm} | {pct(m['acc'])} | {to_99} | {end['qk_cosine']:.4f} "
            f"| {end['ov_cosine']:.4f} "
            f"| {end['pattern_js']:.4f} | {first} | {roles(run)} |"
        )
    return "\n".join(lines)


def specialisation_table(runs):
    lines = [
        "| rule | heads | eval token acc | steps to 99% | roles | ablation drop per head |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for combine in ["sum", "difference"]:
        for n in [1, 2, 4]:
            run = runs / f"specialise-{combine}-h{n}"
            m = metrics(run)
            to_99 = "not reached" if m["to_99"] is None else str(m["to_99"])
            drops = ", ".join(pct(h["ablation_drop"]) for h in heads(run))
            lines.append(
                f"| {combine} | {n} | {pct(m['acc'])} | {to_99} | {roles(run)} | {drops} |"
            )
    return "\n".join(lines)


TASKS = ["neighbors", "sort", "recall"]
LAYOUTS = ["split", "wide", "narrow"]


def summary(run):
    return json.load(open(run / "inspect" / "summary.json"))


def pruning(run):
    return json.load(open(run / "inspect" / "pruning.json"))


def layouts_table(runs):
    lines = [
        "| task | layout | d_head | attention params | all params | eval token acc "
        "| steps to 99% | ms per step | heads with a role | mean pattern JS |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for task in TASKS:
        for layout in LAYOUTS:
            run = runs / f"layouts-{task}-{layout}"
            m, s = metrics(run), summary(run)
            to_99 = "not reached" if m["to_99"] is None else str(m["to_99"])
            ms = 1000 * m["seconds"] / m["steps"]
            lines.append(
                f"| {task} | {layout} | {s['d_head']} | {s['attention_params']:,} "
                f"| {s['n_params']:,} | {pct(m['acc'])} | {to_99} | {ms:.1f} "
                f"| {s['heads_with_role']} of {s['n_layers'] * s['n_heads']} "
                f"| {s['mean_pattern_js']:.3f} |"
            )
    return "\n".join(lines)


def accuracy_after(curve, removed):
    return next(s["token_acc"] for s in curve["steps"] if s["heads_removed"] == removed)


def pruning_table(runs):
    lines = [
        "| task | layout | full model | removable (greedy) | removable (ranked) "
        "| acc, half the heads removed (greedy) | acc, one head left (greedy) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for task in TASKS:
        for layout in LAYOUTS:
            p = pruning(runs / f"layouts-{task}-{layout}")
            total = p["total_heads"]
            lines.append(
                f"| {task} | {layout} | {pct(p['base_token_acc'])} "
                f"| {p['greedy']['removable']} of {total} "
                f"| {p['ranked']['removable']} of {total} "
                f"| {pct(accuracy_after(p['greedy'], total // 2))} "
                f"| {pct(accuracy_after(p['greedy'], total - 1))} |"
            )
    return "\n".join(lines)


def seeds_table(runs, config, scores=None):
    """One row per seed; per slot (a head of seed 0) the matched head, with its role (or,
    when `scores` names patterns, its own heads.json scores for them) and its pattern
    similarity to the slot's head."""
    comparison = json.load(open(runs / f"seeds-{config}-compare" / "matching.json"))
    slots = comparison["slots"]
    header = "| seed | eval token acc | steps to 99% | " + " | ".join(
        f"L{s['layer']}H{s['head']} of seed 0" for s in slots
    ) + " |"
    lines = [header, "| --- " * (3 + len(slots)) + "|"]
    for run in comparison["runs"]:
        m = metrics(Path(run["dir"]))
        own = heads(Path(run["dir"]))
        to_99 = "not reached" if m["to_99"] is None else str(m["to_99"])
        cells = []
        for s in slots:
            matched = run["layers"][s["layer"]]
            partner = matched["partner"][s["head"]]
            if scores:
                record = next(h for h in own if h["layer"] == s["layer"] and h["head"] == partner)
                what = " / ".join(
                    f"{name.split('_')[0]} {record['pattern_scores'][name]:.2f}" for name in scores
                )
            else:
                what = run["roles"][s["layer"]][s["head"]]
            cells.append(f"H{partner}: {what} (sim {matched['similarity'][s['head']]:.2f})")
        lines.append(f"| {run['seed']} | {pct(m['acc'])} | {to_99} | " + " | ".join(cells) + " |")
    n = len(comparison["runs"])
    lines.append("")
    for layer, counts in enumerate(comparison["runs_with_role"]):
        listed = ", ".join(f"{role} in {k} of {n}" for role, k in counts.items())
        lines.append(f"Layer {layer}, seeds with at least one head of each role: {listed}.")
    lines.append("")
    means = ", ".join(
        f"L{s['layer']}H{s['head']} {s['mean_similarity']:.2f}" for s in slots
    )
    lines.append(f"Mean pattern similarity of the matched heads to seed 0's: {means}.")
    return "\n".join(lines)


def main():
    runs, docs = Path(sys.argv[1]), Path(sys.argv[2])
    docs.mkdir(parents=True, exist_ok=True)
    text = (
        "## 1. Symmetry breaking\n\n" + symmetry_table(runs) + "\n\n"
        "## 2. Specialisation on neighbors\n\n" + specialisation_table(runs) + "\n\n"
        "## 3. Head layouts\n\n" + layouts_table(runs) + "\n\n"
        "## 4. Seeds\n\n### neighbors, difference rule, 2 heads\n\n"
        + seeds_table(runs, "difference", ["previous_token", "next_token"]) + "\n\n### recall, 2 layers x 4 heads\n\n"
        + seeds_table(runs, "recall") + "\n\n"
        "## 5. Pruning\n\n" + pruning_table(runs) + "\n"
    )
    (docs / "results.md").write_text(text)
    print(text)
    figures = {
        "symmetry-random/inspect/figures/divergence.png": "symmetry-random-divergence.png",
        "symmetry-symmetric-dropout/inspect/figures/divergence.png":
            "symmetry-symmetric-dropout-divergence.png",
        "specialise-difference-h2/inspect/figures/attention.png":
            "specialise-difference-h2-attention.png",
        "specialise-sum-h2/inspect/figures/attention.png": "specialise-sum-h2-attention.png",
        "seeds-difference-compare/matched-attention.png": "seeds-difference-matched.png",
        "seeds-recall-compare/matched-attention.png": "seeds-recall-matched.png",
        "layouts-recall-split/inspect/figures/pruning.png": "layouts-recall-split-pruning.png",
    }
    for source, target in figures.items():
        shutil.copyfile(runs / source, docs / target)
    print(f"wrote {docs / 'results.md'} and {len(figures)} figures")


if __name__ == "__main__":
    main()
