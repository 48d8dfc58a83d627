#!/usr/bin/env python3
"""Experiment 9, syntax from scratch: which heads of masked LMs trained here on English come
to track syntax, when, and in how many seeds (docs/experiment-9-syntax.md).

In steps, so every number of the chapter recomputes from data kept in the repository:

  python3 scripts/experiments/experiment9_table.py collect RUNS RECORDS_DIR [--note TEXT]
      [--compared DIR]
  python3 scripts/experiments/experiment9_table.py render RECORDS_DIR [--no-figure]
  python3 scripts/experiments/experiment9_table.py keep-matching MATCHING_JSON RECORDS_DIR

`collect` reads one inspected run, or every inspected run under a directory of runs (each
with config.toml, inspect/relations-over-training.json and inspect/relations.json), into one
compact record per run, RECORDS_DIR/RUN.json: its curves at every snapshot (the syntactic
and positional figures, the replication's syntactic figure, the held-out loss), its onsets,
each counted label at the last snapshot (head, score, offset score; the replication's), its
relation ablation (the final model's relations.json), and per scored sentence the hits and
arcs of the syntactic and positional figures and of each label (the tables the
Multi-Bootstrap resamples). With --compared, where DIR/minilm-RUN/matching.json holds
`headlab compare RUN runs/minilm`, the record keeps each head's matched MiniLM head and their
pattern similarity. A record is written as soon as its run is inspected: runs need not
outlive a session on this project's machines, the records are committed, and the seeds of a
set are trained over several sessions.

`keep-matching` keeps `headlab compare --across-layers` of the seeds (its matching.json) beside
the records, as RECORDS_DIR-compare-across.json: per run, per head of the first run, its
matched head and its similarity to every head of the run.

`render` writes the chapter's tables (RECORDS_DIR.md) and figures (RECORDS_DIR-onsets.png and
RECORDS_DIR-labels.png) from the records alone (and RECORDS_DIR-compare-across.json where it is
kept), after checking that they are seeds of one
config read the same way, with every interval from `headlab sweep stats`
(headlab_stats.py): means over seeds with Student's t intervals, shares of seeds with Wilson
intervals, and the Multi-Bootstrap (seeds and sentences resampled together) for the
headline figures.
"""

import argparse
import json
import math
from pathlib import Path

from headlab_stats import intervals, multi_bootstraps, shares, show, show_bootstrap, show_share
from onset_windows import second_fall

# The loss's second fall (onset_windows.py) was defined after seeds 0 to 5 were read, and
# with it, before any later seed was, what "the syntactic rise comes with the second fall"
# predicts for each later seed: its syntactic onset from a quarter-decade before the second
# fall to half a decade after it (in decades of steps; seeds 0 to 5 lie 0.1 to 0.4 after).
SECOND_FALL_DEFINED_AFTER_SEED = 5
WITH_THE_SECOND_FALL = (-0.25, 0.5)

# Labels of at least this many arcs in the scored sentences (EWT test's first 500) are
# counted, as in the runs' own figures.
MIN_ARCS = 100


def read_json(path: Path):
    return json.loads(path.read_text())


def beating(step: dict) -> list:
    """The counted labels whose head beats their offset at one snapshot."""
    return sorted(
        label["relation"]
        for label in step["labels"]
        if label["arcs"] >= MIN_ARCS and beats_on_test(label)
    )


def collect_run(run: Path) -> dict:
    over = read_json(run / "inspect" / "relations-over-training.json")
    relations = read_json(run / "inspect" / "relations.json")
    config = (run / "config.toml").read_text()
    seed = next(
        int(line.split("=")[1]) for line in config.splitlines() if line.startswith("seed =")
    )
    steps = over["steps"]
    last, last_replicated = steps[-1], over["replication"][-1]
    replicated = {label["relation"]: label for label in last_replicated["labels"]}
    final = {r["relation"]: r for r in relations["relations"]}
    labels = {}
    for label in last["labels"]:
        if label["arcs"] < MIN_ARCS:
            continue
        name = label["relation"]
        other = replicated.get(name, {})
        ablation = final.get(name, {}).get("best", {})
        labels[name] = {
            "arcs": label["arcs"],
            "head": f"L{label['layer']}H{label['head']}",
            "direction": label["direction"],
            "score": label["score"],
            "offset": label["offset"],
            "offset_score": label["offset_score"],
            "dev_score": other.get("score"),
            "dev_offset_score": other.get("offset_score"),
            "clark_rule": {
                key: best["score"]
                for key, best in (final.get(name, {}).get("clark_rule") or {}).items()
            },
            # The final model's best head per direction by headlab's rule (a word's
            # attention to itself counted), chosen and scored as the Clark column is.
            "headlab_rule": {key: best["score"] for key, best in ablation.items() if best},
            "resample_ablation": {
                key: [best.get("resample_drop_on_relation"), best.get("resample_drop_elsewhere")]
                for key, best in ablation.items()
            },
            # Absent from a record of a run inspected before relations.json measured the
            # loss (2026-11-30): render leaves such a seed out of the loss columns.
            "resample_loss_rise": {
                key: [
                    best.get("resample_loss_rise_on_relation"),
                    best.get("resample_loss_rise_elsewhere"),
                ]
                for key, best in ablation.items()
                if best.get("resample_loss_rise_on_relation") is not None
            },
            "ablation_words": {
                key: best.get("words_on_relation")
                for key, best in ablation.items()
                if best.get("words_on_relation") is not None
            },
        }
    sentences = over["last_step_sentences"]
    n = over["scored_sentences"]
    total = lambda key: [sum(label[key][i] for label in sentences) for i in range(n)]
    return {
        "seed": seed,
        "run": run.name,
        "chosen_on": over["chosen_on"],
        "scored_sentences": over["scored_sentences"],
        "config": config,
        "curves": [
            {
                "step": s["step"],
                "syntactic": s["syntactic"],
                "positional": s["positional"],
                "replicated": r["syntactic"],
                "held_out_loss": s.get("held_out_loss"),
                "labels_beating_offset": s["labels_beating_offset"],
                # Which: on test, and on dev (the replication).
                "beating_test": beating(s),
                "beating_dev": beating(r),
            }
            for s, r in zip(steps, over["replication"])
        ],
        "onsets": over["onsets"],
        "labels": labels,
        "sentences": {
            "arcs": total("arcs"),
            "syntactic_hits": total("head_hits"),
            "positional_hits": total("offset_hits"),
            "labels": {
                label["relation"]: [label["arcs"], label["head_hits"], label["offset_hits"]]
                for label in sentences
            },
        },
    }


def inspected(path: Path) -> list:
    """`path` itself when it is an inspected run, else the inspected runs under it."""
    if (path / "inspect" / "relations-over-training.json").is_file():
        return [path]
    if not path.is_dir():
        raise SystemExit(f"experiment9: {path} is neither an inspected run nor a directory of runs")
    return sorted(
        (p for p in path.iterdir() if (p / "inspect" / "relations-over-training.json").is_file()),
        key=lambda p: p.name,
    )


def minilm_match(matching: Path) -> list:
    """Per layer of the text run (compare's reference), per head: the MiniLM head matched to
    it (`L2H7`) and their pattern similarity, from `headlab compare RUN MINILM`'s
    matching.json."""
    minilm = read_json(matching)["runs"][1]
    return [
        [
            {"head": f"L{partner_layer}H{partner}", "similarity": similarity}
            for partner, partner_layer, similarity in zip(
                layer["partner"], layer["partner_layer"] or [layer["layer"]] * len(layer["partner"]),
                layer["similarity"],
            )
        ]
        for layer in minilm["layers"]
    ]


def write_compact_json(out: Path, value) -> None:
    """`value` as one line of JSON in `out`, written whole, then renamed: a record is never
    half there."""
    partial = out.with_suffix(".json.partial")
    partial.write_text(json.dumps(value, separators=(",", ":")) + "\n")
    partial.replace(out)


def keep_matching(matching: Path, records: Path) -> None:
    """`headlab compare --across-layers` of the seeds kept beside the records (the runs need
    not outlive the session): per run, per head of the first run (layer-major), the head
    matched to it, their similarity, and its similarity to every head of the run
    (layer-major)."""
    compared = read_json(matching)
    if not compared.get("across_layers"):
        raise SystemExit(
            f"experiment9: {matching} was not matched across layers (headlab compare --across-layers)"
        )
    heads = len(compared["runs"][0]["layers"][0]["partner"])
    runs = []
    for run in compared["runs"]:
        slots = [
            {
                "partner": f"L{layer['partner_layer'][h]}H{layer['partner'][h]}",
                "similarity": round(layer["similarity"][h], 4),
                "row": [round(x, 4) for x in row],
            }
            for layer in run["layers"]
            for h, row in enumerate(layer["matrix"])
        ]
        runs.append({"run": Path(run["dir"]).name, "seed": run["seed"], "slots": slots})
    kept = {"heads_per_layer": heads, "probe_size": compared["probe_size"], "runs": runs}
    out = records.with_name(records.name + "-compare-across.json")
    write_compact_json(out, kept)
    print(f"experiment9: {matching} into {out}")


def collect(runs: Path, records: Path, note: str, compared: Path | None) -> None:
    found = inspected(runs)
    if not found:
        raise SystemExit(f"experiment9: no inspected text run under {runs}")
    records.mkdir(parents=True, exist_ok=True)
    for run in found:
        record = {"source": note, "min_arcs": MIN_ARCS, **collect_run(run)}
        matching = compared / f"minilm-{run.name}" / "matching.json" if compared else None
        if matching and matching.is_file():
            record["minilm"] = minilm_match(matching)
        out = records / f"{run.name}.json"
        write_compact_json(out, record)
        print(f"experiment9: {run} into {out}")


def without_seed(config: str) -> str:
    return "\n".join(line for line in config.splitlines() if not line.startswith("seed ="))


def load(records: Path) -> dict:
    """Every record in `records`, checked to be seeds of one config read one way."""
    paths = sorted(records.glob("*.json"))
    if not paths:
        raise SystemExit(f"experiment9: no record in {records} (experiment9_table.py collect)")
    seeds = [read_json(path) for path in paths]
    for key in ["chosen_on", "scored_sentences", "min_arcs"]:
        values = {json.dumps(s[key]) for s in seeds}
        if len(values) > 1:
            raise SystemExit(f"experiment9: the records in {records} differ in {key}: {sorted(values)}")
    if len({without_seed(s["config"]) for s in seeds}) > 1:
        raise SystemExit(f"experiment9: the records in {records} are not seeds of one config")
    numbers = [s["seed"] for s in seeds]
    if len(set(numbers)) < len(numbers):
        raise SystemExit(f"experiment9: a seed is recorded twice in {records}: {sorted(numbers)}")
    return {
        "sources": sorted({s["source"] for s in seeds}),
        "chosen_on": seeds[0]["chosen_on"],
        "scored_sentences": seeds[0]["scored_sentences"],
        "seeds": sorted(seeds, key=lambda s: s["seed"]),
    }


def log_onsets(seeds: list, key: str) -> list:
    return [math.log10(s["onsets"][key]["step"]) for s in seeds if s["onsets"].get(key)]


def loss_second_fall(seed: dict):
    """The seed's second fall of its held-out loss, from its recorded curve."""
    return second_fall([(c["step"], c["held_out_loss"]) for c in seed["curves"]])


def second_fall_lines(seeds: list, seconds: dict) -> list:
    """The second fall's row of the onsets table is written by the caller; these are the
    lines after it: each seed's lag of the syntactic onset behind its second fall (`seconds`,
    by seed), summed apart over the seeds read before the definition and the seeds that test
    it."""
    lags = {}
    for s in seeds:
        second, onset = seconds[s["seed"]], s["onsets"].get("syntactic")
        if second and onset:
            lags[s["seed"]] = math.log10(onset["step"]) - math.log10(second["step"])
    if not lags:
        return []
    low, high = WITH_THE_SECOND_FALL
    before = {k: v for k, v in lags.items() if k <= SECOND_FALL_DEFINED_AFTER_SEED}
    after = {k: v for k, v in lags.items() if k > SECOND_FALL_DEFINED_AFTER_SEED}
    lines = [
        "",
        "The syntactic onset minus the loss's second fall, in decades of steps, per seed: "
        + ", ".join(f"{v:+.2f} (seed {k})" for k, v in sorted(lags.items()))
        + ".",
    ]
    for group, name in [
        (before, f"seeds 0 to {SECOND_FALL_DEFINED_AFTER_SEED}, read before the second fall was defined (a description)"),
        (after, f"seeds after {SECOND_FALL_DEFINED_AFTER_SEED}, its test"),
    ]:
        if not group:
            lines.append(f"- Over {name}: none yet.")
            continue
        lag = intervals({"lag": list(group.values())})["lag"]
        inside = sum(low <= v <= high for v in group.values())
        lines.append(
            f"- Over {name}: {show(lag, 2)} ({len(group)} seed{'' if len(group) == 1 else 's'}); "
            f"{inside} of {len(group)} from {low:+.2f} to {high:+.2f}, the range fixed with the definition "
            "for \"the syntactic rise comes with the second fall\"."
        )
    return lines


def show_steps(estimate: dict) -> str:
    """A mean of log10 steps as the geometric mean step with its interval."""
    if estimate is None:
        return "none"
    mean = estimate["mean"]
    if estimate["ci95"] is None:
        return f"{10 ** mean:,.0f}"
    low, high = mean - estimate["ci95"], mean + estimate["ci95"]
    return f"{10 ** mean:,.0f} ({10 ** low:,.0f} to {10 ** high:,.0f})"


def headline(seeds: list) -> list:
    """The figures at the last snapshot over seeds: the t interval over seeds and the
    Multi-Bootstrap of seeds and sentences together."""
    tables = {}
    for figure in ["syntactic", "positional"]:
        tables[figure] = (
            [s["sentences"][f"{figure}_hits"] for s in seeds],
            [s["sentences"]["arcs"] for s in seeds],
        )
    boot = multi_bootstraps(tables)
    rows = []
    for figure in ["syntactic", "positional"]:
        b = boot[figure]
        rows.append(
            f"| {figure} | {show_bootstrap(b, 3)} | {show(b['over_seeds'], 3)} |"
        )
    return rows


def label_names(seeds: list) -> list:
    """Every label counted in some seed, most arcs first."""
    return sorted(
        {name for s in seeds for name in s["labels"]},
        key=lambda name: -max(s["labels"].get(name, {}).get("arcs", 0) for s in seeds),
    )


def beats_on_test(label: dict) -> bool:
    return label["score"] > label["offset_score"]


def beats_on_dev(label: dict) -> bool:
    return (label["dev_score"] or 0) > (label["dev_offset_score"] or 0)


def has_appeared(label: dict) -> bool:
    """The chapter's rule: the dev-chosen head beats its offset on test and the test-chosen
    head beats its offset on dev."""
    return beats_on_test(label) and beats_on_dev(label)


def label_rows(seeds: list) -> list:
    names = label_names(seeds)
    counts, tables = {}, {}
    for name in names:
        present = [s for s in seeds if name in s["labels"]]
        test = sum(beats_on_test(s["labels"][name]) for s in present)
        dev = sum(beats_on_dev(s["labels"][name]) for s in present)
        both = sum(has_appeared(s["labels"][name]) for s in present)
        counts[f"{name} test"] = (test, len(present))
        counts[f"{name} dev"] = (dev, len(present))
        counts[f"{name} both"] = (both, len(present))
        arcs = [s["sentences"]["labels"][name][0] for s in present]
        head_hits = [s["sentences"]["labels"][name][1] for s in present]
        offset_hits = [s["sentences"]["labels"][name][2] for s in present]
        tables[f"{name} head"] = (head_hits, arcs)
        tables[f"{name} offset"] = (offset_hits, arcs)
    share = shares(counts)
    boot = multi_bootstraps(tables)
    rows = []
    for name in names:
        present = [s for s in seeds if name in s["labels"]]
        layers = sorted({s["labels"][name]["head"].split("H")[0] for s in present})
        rows.append(
            f"| {name} | {present[0]['labels'][name]['arcs']} | "
            f"{show_bootstrap(boot[name + ' head'], 2)} | {show_bootstrap(boot[name + ' offset'], 2)} | "
            f"{show_share(share[name + ' test'])} | {show_share(share[name + ' dev'])} | "
            f"{show_share(share[name + ' both'])} | {', '.join(layers)} |"
        )
    return rows


# Clark et al. 2019 (section 4.2), BERT-base on the WSJ Penn Treebank's dependencies, their
# best head's accuracy where they report a relation of the same name (dobj is UD's obj), as
# experiment8_table.py quotes them; dependent to head.
CLARK = {"det": 94.3, "obj": 86.8}


def rule_rows(seeds: list) -> list:
    """Per counted label, the final model's best dependent-to-head head scored by headlab's
    rule (a word's attention to itself counted) and by Clark et al.'s (left out: a word's
    attention renormalised over the other words), mean ± t interval over seeds, in percent,
    with Clark et al.'s BERT-base figure where they report the label."""
    names = label_names(seeds)
    groups = {}
    for name in names:
        for rule in ["headlab_rule", "clark_rule"]:
            values = [
                100 * s["labels"][name][rule]["dependent_to_head"]
                for s in seeds
                if name in s["labels"]
                and (s["labels"][name].get(rule) or {}).get("dependent_to_head") is not None
            ]
            if values:
                groups[f"{name} {rule}"] = values
    if not groups:
        return []
    estimates = intervals(groups)
    rows = []
    for name in names:
        ours, theirs = estimates.get(f"{name} headlab_rule"), estimates.get(f"{name} clark_rule")
        if not ours or not theirs:
            continue
        bert = f"{CLARK[name]:.1f}" if name in CLARK else "-"
        rows.append(f"| {name} | {theirs['n']} | {show(ours, 1)} | {show(theirs, 1)} | {bert} |")
    return rows


def ablation_rows(seeds: list) -> list:
    """For det, case and obj, and every label that has appeared in some seed: each seed's best
    head of the final model (relations.json) in the direction its label's head reads,
    resample-ablated: accuracy lost on the label's masked words and on every other masked
    word, in points, and the masked-LM loss gained on each, in nats, mean ± t interval over
    seeds, and their differences."""
    rows, groups = [], {}
    appeared = sorted(
        {
            name
            for s in seeds
            for name, label in s["labels"].items()
            if has_appeared(label)
        }
        - {"det", "case", "obj"}
    )
    labels = ["det", "case", "obj"] + appeared

    def pairs(name: str, key: str) -> list:
        """Per seed with the label: [on its words, elsewhere] of `key` in its direction."""
        found = []
        for s in seeds:
            label = s["labels"].get(name)
            if not label:
                continue
            pair = (label.get(key) or {}).get(label["direction"])
            if pair and pair[0] is not None and pair[1] is not None:
                found.append(pair)
        return found

    for name in labels:
        for key, scale in [("resample_ablation", 100), ("resample_loss_rise", 1)]:
            for on, elsewhere in pairs(name, key):
                groups.setdefault(f"{name} {key} on", []).append(scale * on)
                groups.setdefault(f"{name} {key} elsewhere", []).append(scale * elsewhere)
                groups.setdefault(f"{name} {key} difference", []).append(
                    scale * (on - elsewhere)
                )
        words = [
            s["labels"][name]["ablation_words"][s["labels"][name]["direction"]]
            for s in seeds
            if s["labels"].get(name, {}).get("ablation_words", {}).get(
                s["labels"][name]["direction"]
            )
        ]
        if words:
            groups[f"{name} words"] = words
    if not groups:
        return rows
    estimates = intervals(groups)
    for name in labels:
        accuracy = [estimates.get(f"{name} resample_ablation {part}") for part in PARTS]
        loss = [estimates.get(f"{name} resample_loss_rise {part}") for part in PARTS]
        if not accuracy[0] and not loss[0]:
            continue
        seeds_with = (accuracy[0] or loss[0])["n"]
        words = estimates.get(f"{name} words")
        cells = [show(e, 2) if e else "-" for e in accuracy] + [
            show(e, 3) if e else "-" for e in loss
        ]
        words = f"{words['mean']:.0f}" if words else "-"
        rows.append(f"| {name} | {seeds_with} | {words} | " + " | ".join(cells) + " |")
    return rows


PARTS = ["on", "elsewhere", "difference"]


def curve_rows(seeds: list) -> list:
    """The curves at every snapshot all seeds have, averaged over the seeds."""
    steps = [c["step"] for c in seeds[0]["curves"]]
    at = [{c["step"]: c for c in s["curves"]} for s in seeds]
    rows = []
    for step in steps:
        if not all(step in a for a in at):
            continue
        mean = lambda key: sum(a[step][key] for a in at) / len(at)
        both = {}
        for a in at:
            for name in set(a[step].get("beating_test", [])) & set(a[step].get("beating_dev", [])):
                both[name] = both.get(name, 0) + 1
        shown_both = ", ".join(f"{name} {n}" for name, n in sorted(both.items())) or "-"
        loss = [a[step]["held_out_loss"] for a in at if a[step]["held_out_loss"] is not None]
        shown_loss = f"{sum(loss) / len(loss):.3f}" if loss else "-"
        rows.append(
            f"| {step:,} | {mean('syntactic'):.3f} | {mean('replicated'):.3f} | "
            f"{mean('positional'):.3f} | {shown_loss} | {mean('labels_beating_offset'):.1f} | "
            f"{shown_both} |"
        )
    return rows


# Experiment 8's reading of all-MiniLM-L6-v2 on EWT test: each label's best head there.
MINILM_RELATIONS = Path(__file__).resolve().parents[2] / "docs/experiments/minilm/ewt-test/relations.json"


def parse_head(name: str) -> tuple:
    """`L1H2` as (layer, head)."""
    layer, head = (int(x) for x in name[1:].split("H"))
    return layer, head


def head_index(name: str, heads: int) -> int:
    """`L1H2` as its layer-major index in a model of `heads` heads a layer."""
    layer, head = parse_head(name)
    return layer * heads + head


def ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def across_rows(seeds: list, kept: dict) -> list:
    """Per label that has appeared in some seed: the first run's best head for it, and each
    other seed's best head placed among that seed's heads by its pattern similarity to the
    first run's (1st: the most similar of them all), with whether the one-to-one matching
    across layers paired the two."""
    heads = kept["heads_per_layer"]
    by_seed = {s["seed"]: s for s in seeds}
    reference, others = kept["runs"][0], [r for r in kept["runs"][1:] if r["seed"] in by_seed]
    if reference["seed"] not in by_seed or not others:
        return []
    rows = []
    for name in label_names(seeds):
        if not any(has_appeared(s["labels"][name]) for s in seeds if name in s["labels"]):
            continue
        ours = by_seed[reference["seed"]]["labels"].get(name)
        if not ours:
            continue
        cells, ranks, paired = [], [], 0
        for run in others:
            label = by_seed[run["seed"]]["labels"].get(name)
            if not label:
                continue
            slot = run["slots"][head_index(ours["head"], heads)]
            row, best = slot["row"], head_index(label["head"], heads)
            rank = 1 + sum(x > row[best] for x in row)
            is_partner = slot["partner"] == label["head"]
            paired += is_partner
            ranks.append(rank)
            cells.append(
                f"{run['seed']}: {label['head']} ({ordinal(rank)}, {row[best]:.2f}"
                f"{', paired' if is_partner else ''})"
            )
        if not cells:
            continue
        mean_rank = sum(ranks) / len(ranks)
        rows.append(
            f"| {name} | {ours['head']} | {'; '.join(cells)} | {mean_rank:.1f} | "
            f"{paired} of {len(cells)} |"
        )
    return rows


def minilm_rows(seeds: list) -> list:
    """Per counted label, the MiniLM head each seed's best head for it is matched to
    (compare's matching, on the pattern similarity of the two heads), against MiniLM's own
    best head for the label in that direction (experiment 8)."""
    with_match = [s for s in seeds if s.get("minilm")]
    if not with_match or not MINILM_RELATIONS.is_file():
        return []
    best = {
        r["relation"]: {
            direction: f"L{b['layer']}H{b['head']}" for direction, b in r["best"].items() if b
        }
        for r in read_json(MINILM_RELATIONS)["relations"]
    }
    rows = []
    names = label_names(with_match)
    for name in names:
        matched, similarities, same = [], [], 0
        for s in with_match:
            label = s["labels"].get(name)
            if not label:
                continue
            layer, head = parse_head(label["head"])
            partner = s["minilm"][layer][head]
            matched.append(partner["head"])
            similarities.append(partner["similarity"])
            same += partner["head"] == best.get(name, {}).get(label["direction"])
        if not matched:
            continue
        # Ties go to the first head by name: a set's order changes with Python's string
        # hashing from one run to the next, and so did this column.
        common = max(sorted(set(matched)), key=matched.count)
        mean = sum(similarities) / len(similarities)
        ours = ", ".join(sorted(set(best.get(name, {}).values()))) or "-"
        rows.append(
            f"| {name} | {len(matched)} | {common} ({matched.count(common)}) | {mean:.2f} | "
            f"{ours} | {same} |"
        )
    return rows


def figure(seeds: list, seconds: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 7), sharex=True)
    for s in seeds:
        curve = [c for c in s["curves"] if c["step"] > 0]
        steps = [c["step"] for c in curve]
        top.plot(steps, [c["syntactic"] for c in curve], color="tab:blue", alpha=0.4, lw=1)
        top.plot(steps, [c["positional"] for c in curve], color="tab:gray", alpha=0.4, lw=1, ls="--")
        loss = [(c["step"], c["held_out_loss"]) for c in curve if c["held_out_loss"] is not None]
        bottom.plot([x for x, _ in loss], [y for _, y in loss], color="tab:red", alpha=0.4, lw=1)
        second = seconds[s["seed"]]
        if second:
            bottom.axvline(second["step"], color="tab:red", alpha=0.15)
        onset = s["onsets"].get("syntactic")
        if onset:
            top.axvline(onset["step"], color="tab:blue", alpha=0.15)
    top.set_ylabel("fraction of arcs found (EWT test)")
    top.set_title("syntactic figure (blue; its onset: vertical lines) and positional (grey, dashed)")
    bottom.set_ylabel("held-out masked-LM loss (nats)")
    bottom.set_title("held-out loss (its second fall: vertical lines)")
    bottom.set_xlabel("training step (log scale)")
    bottom.set_xscale("log")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def label_figure(seeds: list, out: Path) -> None:
    """Per counted label (most arcs first, top down), each seed's best head at the last
    snapshot (chosen on EWT dev, scored on test) against its best offset: the figure of the
    best heads per label at the end that a reader looks at first."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = label_names(seeds)
    fig, ax = plt.subplots(figsize=(8, 1.5 + 0.38 * len(names)))
    for row, name in enumerate(names):
        present = [s["labels"][name] for s in seeds if name in s["labels"]]
        # Seeds spread a little around their label's row, in seed order.
        spread = [row + 0.5 * (k - (len(present) - 1) / 2) / max(len(present), 2) for k in range(len(present))]
        for y, label in zip(spread, present):
            ax.plot([label["offset_score"]] * 2, [y - 0.08, y + 0.08], color="tab:gray", lw=1.5)
            appeared = has_appeared(label)
            ax.plot(
                label["score"],
                y,
                "o",
                ms=5,
                color="tab:blue",
                markerfacecolor="tab:blue" if appeared else "white",
            )
    ax.set_yticks(range(len(names)), names)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("fraction of the label's arcs found (chosen on EWT dev, scored on EWT test)")
    ax.set_title(
        f"{len(seeds)} seed{'s' if len(seeds) != 1 else ''} at the last snapshot: each seed's best head (circle; "
        "filled where the label has appeared)\nagainst its best fixed offset (grey bar)",
        fontsize=9,
    )
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def render(records: Path, draw: bool = True) -> None:
    data = load(records)
    seeds = data["seeds"]
    onsets = intervals(
        {
            key: log_onsets(seeds, key)
            for key in ["syntactic", "syntactic_replicated", "loss_fall"]
            if log_onsets(seeds, key)
        }
    )
    both = [
        math.log10(s["onsets"]["syntactic"]["step"]) - math.log10(s["onsets"]["loss_fall"]["step"])
        for s in seeds
        if s["onsets"].get("syntactic") and s["onsets"].get("loss_fall")
    ]
    lag = intervals({"lag": both})["lag"] if both else None
    last_steps = sorted({s["curves"][-1]["step"] for s in seeds})
    lines = [
        "# Experiment 9 data: syntax from scratch",
        "",
        f"Written by `scripts/experiments/experiment9_table.py render {records}` from the "
        f"records in {records.name}/ ({'; '.join(data['sources'])}). {len(seeds)} seed"
        f"{'' if len(seeds) == 1 else 's'} ({', '.join(str(s['seed']) for s in seeds)}), trained to step "
        f"{', '.join(str(s) for s in last_steps)}; heads and offsets chosen on "
        f"{data['chosen_on']}, scored on {data['scored_sentences']} sentences of EWT test "
        "(and, the replication, the other way round).",
        "",
        "## The figures at the last snapshot",
        "",
        "Estimate with its Multi-Bootstrap 95% interval (seeds and sentences resampled "
        "together, 2000 draws) and the t interval over seeds alone.",
        "",
        "| figure | estimate (Multi-Bootstrap) | mean ± t interval over seeds |",
        "| --- | --- | --- |",
    ]
    lines += headline(seeds)
    lines += [
        "",
        "## Over training",
        "",
        "At every snapshot, the mean over seeds: the syntactic figure (heads chosen on dev, "
        "scored on test), its replication (chosen on test, scored on dev), the positional "
        "figure (offsets), the held-out masked-LM loss (nats), the labels whose head beats "
        "their offset on test, and which labels' heads beat their offsets on test and on dev "
        "at once (with how many seeds).",
        "",
        "| step | syntactic | replication | positional | held-out loss | labels beating their offset (test) | beating on test and dev (seeds) |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    lines += curve_rows(seeds)
    lines += [
        "",
        "## Onsets",
        "",
        "The step of the steepest rise per quarter-decade window (geometric mean over the seeds "
        "that have one, with its 95% t interval on the log scale), and how much the curve rose "
        "across that window (mean ± t interval): a window is always found where a curve moves "
        "at all, so a small rise is noise, not an onset.",
        "",
        "| curve | seeds with one | step | rise across its window |",
        "| --- | ---: | --- | --- |",
    ]
    rises = intervals(
        {
            key: [s["onsets"][key]["rise"] for s in seeds if s["onsets"].get(key)]
            for key in ["syntactic", "syntactic_replicated", "loss_fall"]
            if log_onsets(seeds, key)
        }
    )
    for key, name in [
        ("syntactic", "syntactic figure (test)"),
        ("syntactic_replicated", "syntactic figure (replication on dev)"),
        ("loss_fall", "held-out loss, steepest fall (nats)"),
    ]:
        n = len(log_onsets(seeds, key))
        rise = show(rises[key], 3) if key in rises else "-"
        lines.append(
            f"| {name} | {n} of {len(seeds)} | {show_steps(onsets.get(key))} | {rise} |"
        )
    # Each seed's second fall, found once for the table, the lags and the figure.
    seconds = {s["seed"]: loss_second_fall(s) for s in seeds}
    found = [f for f in seconds.values() if f]
    if found:
        step = intervals({"step": [math.log10(f["step"]) for f in found]})["step"]
        fallen = intervals({"rise": [f["rise"] for f in found]})["rise"]
        lines.append(
            f"| held-out loss, second fall (nats; defined after seeds 0 to "
            f"{SECOND_FALL_DEFINED_AFTER_SEED}) | {len(found)} of {len(seeds)} | "
            f"{show_steps(step)} | {show(fallen, 3)} |"
        )
    if lag:
        lines += [
            "",
            f"The syntactic onset minus the loss's steepest fall, in decades of steps: "
            f"{show(lag, 2)} ({lag['n']} seed{'' if lag['n'] == 1 else 's'}).",
        ]
    lines += second_fall_lines(seeds, seconds)
    lines += [
        "",
        "## Each label at the last snapshot",
        "",
        "Per label of at least 100 arcs: the fraction of its arcs its head finds and its offset "
        "finds (Multi-Bootstrap over seeds and sentences), the seeds whose head beats the "
        "offset on test and, the replication, on dev, and in which it has appeared: both at "
        "once (Wilson intervals), and the layers the seeds' heads sit in.",
        "",
        "| label | arcs | head | offset | seeds beating the offset (test) | (dev) | appeared (both) | layers |",
        "| --- | ---: | --- | --- | --- | --- | --- | --- |",
    ]
    lines += label_rows(seeds)
    rules = rule_rows(seeds)
    if rules:
        lines += [
            "",
            "## Like with like: Clark et al.'s rule",
            "",
            "The final model's best dependent-to-head head per label, chosen and scored on the "
            "scored sentences (relations.json), by headlab's rule (a word's attention to itself "
            "counted) and by Clark et al.'s (left out), in percent, mean ± t interval over "
            "seeds; Clark et al.'s BERT-base figure beside where they report the label: the "
            "Clark column is the one to compare with it.",
            "",
            "| label | seeds | headlab's rule | Clark et al.'s rule | Clark et al., BERT-base |",
            "| --- | ---: | --- | --- | ---: |",
        ]
        lines += rules
    lines += [
        "",
        "## Are the heads needed?",
        "",
        "For det, case and obj, and every label that has appeared in some seed: each seed's "
        "best head of the final model (relations.json, chosen on the scored sentences) in "
        "the direction its label's head reads, resample-ablated. On the masked words that "
        "are the label's dependents (each word of the first scored sentences masked alone; "
        "`words`: how many, mean over seeds) and on every other masked word: the accuracy "
        "lost, in points, and the masked-LM loss gained, in nats per word (mean ± t interval "
        "over seeds; a seed inspected before the loss was measured has no loss). A head "
        "that finds its relation but whose ablation costs its label's words no more than "
        "other words is found, not needed.",
        "",
        "| label | seeds | words | accuracy lost on its words | elsewhere | difference "
        "| loss gained on its words | elsewhere | difference |",
        "| --- | ---: | ---: | --- | --- | --- | --- | --- | --- |",
    ]
    lines += ablation_rows(seeds)
    minilm = minilm_rows(seeds)
    if minilm:
        lines += [
            "",
            "## Against all-MiniLM-L6-v2",
            "",
            "Each seed's best head for a label (its direction) matched to a MiniLM head by "
            "`headlab compare` (the most similar attention pattern on the same treebank "
            "sentences, matched across layers): the MiniLM head most seeds' heads match, with "
            "how many, their mean pattern similarity, MiniLM's own best heads for the label "
            "(experiment 8, EWT test, both directions) and in how many seeds the match is "
            "MiniLM's best head in the same direction.",
            "",
            "| label | seeds | matched MiniLM head (seeds) | mean similarity | MiniLM's best heads | "
            "seeds matching it |",
            "| --- | ---: | --- | ---: | --- | ---: |",
        ]
        lines += minilm
    kept_path = records.with_name(records.name + "-compare-across.json")
    kept = read_json(kept_path) if kept_path.is_file() else None
    across = across_rows(seeds, kept) if kept else []
    if across:
        first, compared = kept["runs"][0]["seed"], len(kept["runs"])
        lines += [
            "",
            "## Across seeds, across layers",
            "",
            f"Per label that has appeared in some seed: seed {first}'s best head for it, and "
            "each other seed's best head, placed among that seed's heads by its "
            f"attention-pattern similarity to seed {first}'s (`headlab compare "
            f"--across-layers` of {compared} seeds, kept in {kept_path.name}; 1st: the most "
            "similar head of the whole model; a head drawn at random would be placed in the "
            "middle on average), with the similarity and `paired` where the one-to-one "
            f"matching paired them; then the mean place, and in how many seeds seed {first}'s "
            "head and the seed's best head are paired.",
            "",
            f"| label | seed {first}'s head | each other seed's best head (place, similarity) | "
            "mean place | paired |",
            "| --- | --- | --- | ---: | ---: |",
        ]
        lines += across
    lines += [
        "",
        f"![The figures and the held-out loss over training]({records.name}-onsets.png)",
        "",
        f"![Each label's best head against its offset, per seed]({records.name}-labels.png)",
        "",
    ]
    out = records.with_name(records.name + ".md")
    out.write_text("\n".join(lines))
    if draw:
        figure(seeds, seconds, records.with_name(records.name + "-onsets.png"))
        label_figure(seeds, records.with_name(records.name + "-labels.png"))
    print(f"experiment9: wrote {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    steps = parser.add_subparsers(dest="step", required=True)
    collecting = steps.add_parser("collect", help="one record per inspected run")
    collecting.add_argument("runs", type=Path, help="an inspected run, or a directory of runs")
    collecting.add_argument("records", type=Path, help="the directory of records")
    collecting.add_argument("--note", default="runs", help="where and when the runs were trained")
    collecting.add_argument("--compared", type=Path, help="a directory of minilm-RUN comparisons")
    keeping = steps.add_parser("keep-matching", help="keep compare --across-layers of the seeds")
    keeping.add_argument("matching", type=Path, help="its matching.json")
    keeping.add_argument("records", type=Path, help="the directory of records")
    rendering = steps.add_parser("render", help="the tables and figure from the records")
    rendering.add_argument("records", type=Path, help="the directory of records")
    rendering.add_argument(
        "--no-figure", action="store_true", help="the tables only (the figure needs matplotlib)"
    )
    args = parser.parse_args()
    if args.step == "collect":
        collect(args.runs, args.records, args.note, args.compared)
    elif args.step == "keep-matching":
        keep_matching(args.matching, args.records)
    else:
        render(args.records, draw=not args.no_figure)


if __name__ == "__main__":
    main()
