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


def main():
    runs, docs = Path(sys.argv[1]), Path(sys.argv[2])
    docs.mkdir(parents=True, exist_ok=True)
    text = (
        "## 1. Symmetry breaking\n\n" + symmetry_table(runs) + "\n\n"
        "## 2. Specialisation on neighbors\n\n" + specialisation_table(runs) + "\n"
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
    }
    for source, target in figures.items():
        shutil.copyfile(runs / source, docs / target)
    print(f"wrote {docs / 'results.md'} and {len(figures)} figures")


if __name__ == "__main__":
    main()
