#!/usr/bin/env python3
"""Experiment 8 on natural text: all-MiniLM-L6-v2's heads on the UD English EWT treebank.

Reads what scripts/experiments/experiment-8.sh wrote: MiniLM's `headlab inspect` reports on
the EWT test set (every sentence; the shipped treebank, inspect's default for an imported
model) and on the dev set (`--probe-conllu`), each on whole sentences and on sentences
masked as in training (`--relations-masked`): `relations.json`, `summary.json` and
`relation-sentences.conllu` in DIR/ewt-test, DIR/ewt-test-masked, DIR/ewt-dev,
DIR/ewt-dev-masked. Writes DIR/../minilm-ewt.md (the tables) and
DIR/../minilm-ewt-relations.png and .svg.

    scripts/experiments/experiment8_natural.py DIR SECONDS

The tables hold every UD label with at least MIN_ARCS arcs in the test set (the rest are in
each relations.json). Clark et al.'s BERT-base figures are placed beside the labels that
CLARK_LABELS maps to theirs; they scored Stanford dependencies of the WSJ Penn Treebank, so
the column is a landmark, never a comparison on the same text.
"""

import json
import sys
from pathlib import Path

import headlab_stats
from experiment8_table import interval, read_conllu

# Labels with fewer arcs in the test set are left out of the tables (not of relations.json).
MIN_ARCS = 100

SPLITS = ["test", "dev"]

DIRECTIONS = [("dependent_to_head", "dep -> head"), ("head_to_dependent", "head -> dep")]

# UD label -> (Clark et al.'s Stanford-dependencies label, the direction of ours that matches
# the direction their head reads). Their heads read dependent to head for every relation but
# `pobj` ("prepositions attend to their objects"); Stanford's `pobj` is the noun that
# depends on a preposition, and UD turns that arc round (`case`: the preposition depends on
# the noun), so their `pobj` head is our `case` read from the dependent. Their `prep` (a
# preposition depending on the word its phrase modifies) has no UD arc with the same two
# ends and is left out.
CLARK_LABELS = {
    "obj": ("dobj", "dependent_to_head"),
    "det": ("det", "dependent_to_head"),
    "nsubj": ("nsubj", "dependent_to_head"),
    "nmod:poss": ("poss", "dependent_to_head"),
    "aux": ("aux", "dependent_to_head"),
    "aux:pass": ("auxpass", "dependent_to_head"),
    "amod": ("amod", "dependent_to_head"),
    "advmod": ("advmod", "dependent_to_head"),
    "mark": ("mark", "dependent_to_head"),
    "ccomp": ("ccomp", "dependent_to_head"),
    "compound": ("nn", "dependent_to_head"),
    "compound:prt": ("prt", "dependent_to_head"),
    "case": ("pobj", "dependent_to_head"),
}

# Clark et al. 2019, Table 1, BERT-base on the WSJ Penn Treebank (Stanford dependencies):
# label -> (their best head, layer-head from 1, its accuracy, their offset baseline and its
# offset). Read from the saved output of the authors' notebook (github.com/clarkkev/
# attention-analysis, Syntax_Analysis.ipynb, "This produces the scores in Table 1"; its
# 0-based heads shown from 1 as in the paper), which agrees with a transcription of the
# paper's table on these rows. `auxpass` is left out: the two sources disagree (94.1 against
# an offset of 82.5 in the notebook; 82.5 against 40.5 in the transcription).
CLARK = {
    "dobj": ("8-10", 86.8, 40.0, -2),
    "det": ("8-11", 94.3, 51.7, 1),
    "nsubj": ("8-2", 58.5, 45.5, 1),
    "poss": ("7-6", 80.5, 47.7, 1),
    "aux": ("4-10", 81.1, 71.5, 1),
    "amod": ("4-10", 75.6, 68.3, 1),
    "advmod": ("7-6", 48.8, 40.2, 1),
    "mark": ("8-2", 50.7, 14.5, 2),
    "ccomp": ("8-1", 48.8, 12.4, -2),
    "nn": ("4-10", 70.4, 70.2, 1),
    "prt": ("6-7", 99.1, 91.4, -1),
    "pobj": ("9-6", 76.3, 34.6, -2),
}
CLARK_SOURCE = (
    "Their figures: Table 1 of the paper, read from the saved output of the authors' notebook "
    "(github.com/clarkkev/attention-analysis, `Syntax_Analysis.ipynb`), which agrees with a "
    "transcription of the table on every row shown; `auxpass` is left out, where the two "
    "disagree. Their offset baseline tried offsets -3 to 2; ours tries every offset. Htut et "
    "al. (2019) scored BERT on English PUD, not EWT, without direction, and give their "
    "per-relation figures only as a bar chart, so none is placed here."
)

# The grammar's relation each UD label is, where the grammar has it (the toys' figures).
GRAMMAR_LABELS = {"det": "det", "amod": "amod", "nsubj": "nsubj", "obj": "dobj",
                  "acl:relcl": "relcl"}


def load(data: Path, name: str) -> dict:
    return json.loads((data / name / "relations.json").read_text())


def by_label(relations: dict) -> dict:
    return {r["relation"]: r for r in relations["relations"]}


def head_name(best: dict) -> str:
    return f"L{best['layer']}H{best['head']}"


def clearly(relation: dict, key: str) -> int:
    return relation["intervals"][key]["heads_clearly_above_baseline"]


def above(relation: dict, key: str) -> bool:
    """Whether the best head beats the offset in at least 97.5% of the resamples."""
    return relation["intervals"][key]["margin"]["low"] > 0


def clark_rule(relation: dict, key: str) -> str:
    """The best head by Clark et al.'s rule (a word's attention to itself left out): head,
    score, and whether it beats the offset on all sentences."""
    best = (relation.get("clark_rule") or {}).get(key)
    if not best:
        return "-"
    mark = "**" if best["beats_baseline"] else ""
    return f"{mark}{head_name(best)} {best['score']:.2f}{mark}"


def main_rows(test: dict, dev: dict) -> list:
    """Test set, whole sentences, every label of MIN_ARCS arcs or more, both directions, with
    the dev set's figures for the same label and direction."""
    rows = []
    labels = sorted((r for r in test.values() if r["arcs"] >= MIN_ARCS), key=lambda r: -r["arcs"])
    for relation in labels:
        name, base = relation["relation"], relation["baseline"]
        ci = relation["intervals"]
        for key, label in DIRECTIONS:
            best = relation["best"][key]
            ours = ci[key]
            other = dev.get(name)
            if other and other.get("intervals"):
                dev_best = other["best"][key]
                same = "same" if head_name(dev_best) == head_name(best) else "other"
                dev_text = (
                    f"{head_name(dev_best)} {dev_best['score']:.2f} against "
                    f"{other['baseline']['score']:.2f}, margin {interval(other['intervals'][key]['margin'])} ({same})"
                )
            else:
                dev_text = "-"
            mark = "**" if above(relation, key) else ""
            rows.append(
                f"| {name} | {label} | {relation['arcs']} | {mark}{head_name(best)} {best['score']:.2f}{mark} "
                f"({interval(ours['best_head'])}) | {base['score']:.2f} ({interval(ci['baseline'])}) at "
                f"{base['offset']:+d} | {interval(ours['margin'])} | {ours['heads_above_baseline']} "
                f"({ours['heads_clearly_above_baseline']}) | {clark_rule(relation, key)} | {dev_text} |"
            )
    return rows


def replication(test: dict, dev: dict) -> dict:
    """How the test set's conclusions hold on the dev set, over every label of MIN_ARCS arcs
    or more in both and both directions."""
    counts = {"cells": 0, "same_head": 0, "above_test": 0, "above_both": 0, "above_dev_only": 0}
    for name, relation in test.items():
        other = dev.get(name)
        if relation["arcs"] < MIN_ARCS or not other or other["arcs"] < MIN_ARCS:
            continue
        for key, _ in DIRECTIONS:
            counts["cells"] += 1
            counts["same_head"] += head_name(relation["best"][key]) == head_name(other["best"][key])
            t, d = above(relation, key), above(other, key)
            counts["above_test"] += t
            counts["above_both"] += t and d
            counts["above_dev_only"] += d and not t
    return counts


def masked_rows(whole: dict, masked: dict) -> list:
    rows = []
    for relation in sorted(whole.values(), key=lambda r: -r["arcs"]):
        if relation["arcs"] < MIN_ARCS:
            continue
        other = masked[relation["relation"]]
        cells = []
        for key, _ in DIRECTIONS:
            a, b = relation["best"][key], other["best"][key]
            cells.append(
                f"{head_name(a)} {a['score']:.2f}, {clearly(relation, key)} clearly above | "
                f"{head_name(b)} {b['score']:.2f}, {clearly(other, key)} clearly above"
            )
        rows.append(
            f"| {relation['relation']} | {relation['arcs']} | {relation['baseline']['score']:.2f} | "
            + " | ".join(cells) + " |"
        )
    return rows


def clark_rows(test: dict) -> list:
    rows = []
    for ud, (theirs, key) in CLARK_LABELS.items():
        relation = test.get(ud)
        if not relation:
            continue
        best = relation["best"][key]
        label = dict(DIRECTIONS)[key]
        figure = CLARK.get(theirs)
        their_text = (
            f"{figure[0]} {figure[1]:.1f}% ({figure[2]:.1f}% at {figure[3]:+d})" if figure
            else "left out (see above)" if theirs == "auxpass" else "not in their table"
        )
        rows.append(
            f"| {ud} ({label}) | {theirs} | {relation['arcs']} | {head_name(best)} {best['score']:.2f} "
            f"({interval(relation['intervals'][key]['best_head'])}) | {clark_rule(relation, key)} | "
            f"{relation['baseline']['score']:.2f} at {relation['baseline']['offset']:+d} | {their_text} |"
        )
    return rows


def where_objects_look(data: Path) -> list:
    """Where the best object-to-verb head looks on every object of the test set: split by
    whether the verb stands just before the object's phrase (its first word, the leftmost
    word of the object's subtree), so that a head that tracks the phrase's left edge and one
    that finds the verb are told apart."""
    report = data / "ewt-test"
    relation = by_label(load(data, "ewt-test"))["obj"]
    looked = relation["attended"]["dependent_to_head"]
    best = relation["best"]["dependent_to_head"]
    sentences = read_conllu(report / "relation-sentences.conllu")
    groups = {True: {"arcs": 0, "verb": 0, "before_phrase": 0, "inside": 0},
              False: {"arcs": 0, "verb": 0, "before_phrase": 0, "inside": 0}}
    misses, index = {}, 0
    for words, heads, labels in sentences:
        # Each word's subtree's leftmost word.
        def leftmost(w):
            children = [d for d in range(len(words)) if heads[d] - 1 == w]
            return min([w] + [leftmost(c) for c in children])

        for w in range(len(words)):
            if heads[w] == 0 or labels[w] != "obj":
                continue
            verb, where = heads[w] - 1, looked[index]
            index += 1
            start = leftmost(w)
            adjacent = verb == start - 1
            group = groups[adjacent]
            group["arcs"] += 1
            group["verb"] += where == verb
            group["before_phrase"] += where == start - 1
            inside = heads_within(heads, where, w)  # the object or a word of its phrase
            group["inside"] += inside
            if where != verb:
                kind = "the object itself" if where == w else (
                    "a word of the object's own phrase" if inside else
                    f"outside the phrase: {labels[where]}")
                misses[kind] = misses.get(kind, 0) + 1
    return [best, groups, misses, index]


def wilson(hits: int, n: int) -> str:
    """`hits` of `n` as a percentage with its 95% Wilson score interval, from `headlab sweep
    stats` (headlab_stats.py), the one Wilson interval of the project."""
    if n == 0:
        return "-"
    return headlab_stats.show_share(headlab_stats.shares({"share": (hits, n)})["share"])


def heads_within(heads: list, word: int, root: int) -> bool:
    """Whether `word` is in `root`'s subtree (0-based positions, `heads` 1-based)."""
    seen = 0
    while word != root and heads[word] != 0 and seen < len(heads):
        word = heads[word] - 1
        seen += 1
    return word == root


def special_rows(data: Path) -> list:
    rows = []
    test = json.loads((data / "ewt-test" / "summary.json").read_text())
    dev = json.loads((data / "ewt-dev" / "summary.json").read_text())
    for a, b in zip(test["special_attention"], dev["special_attention"]):
        rows.append(
            f"| {a['layer']} | {a['cls']:.2f} / {b['cls']:.2f} | {a['sep']:.2f} / {b['sep']:.2f} "
            f"| {a.get('punct', float('nan')):.2f} / {b.get('punct', float('nan')):.2f} |"
        )
    return rows


def figure(test: dict, dev: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [r for r in sorted(test.values(), key=lambda r: -r["arcs"]) if r["arcs"] >= MIN_ARCS]
    fig, axes = plt.subplots(2, 1, figsize=(13, 7.5), sharey=True)
    for ax, (key, title) in zip(axes, DIRECTIONS):
        xs = range(len(labels))
        for shift, (split, data, colour) in enumerate(
            [("test", test, "#1f77b4"), ("dev", dev, "#9ecae1")]
        ):
            rows = [data.get(r["relation"]) for r in labels]
            score = [r["best"][key]["score"] if r else float("nan") for r in rows]
            low = [s - r["intervals"][key]["best_head"]["low"] if r else 0 for s, r in zip(score, rows)]
            high = [r["intervals"][key]["best_head"]["high"] - s if r else 0 for s, r in zip(score, rows)]
            ax.bar([x + 0.38 * shift - 0.19 for x in xs], score, 0.36, yerr=[low, high],
                   color=colour, label=f"MiniLM's best head, EWT {split} (95% interval)")
        ax.scatter(list(xs), [r["baseline"]["score"] for r in labels], color="black", marker="_",
                   s=300, zorder=3, label="best fixed offset (test)")
        ax.set_xticks(list(xs), [r["relation"] for r in labels], rotation=60, ha="right")
        # Headroom above 1 for the legend, off the bars.
        ax.set_ylim(0, 1.2)
        ax.set_yticks([0, 0.2, 0.4, 0.6, 0.8, 1.0])
        ax.set_ylabel("fraction of arcs found")
        ax.set_title(f"{title}: UD labels of {MIN_ARCS} arcs or more in EWT test")
        ax.legend(loc="upper left", ncol=3, fontsize=8)
    fig.tight_layout()
    for suffix in ("png", "svg"):
        fig.savefig(out.with_suffix(f".{suffix}"), dpi=110)


def main() -> None:
    data, seconds = Path(sys.argv[1]), sys.argv[2]
    test_all, dev_all = load(data, "ewt-test"), load(data, "ewt-dev")
    test, dev = by_label(test_all), by_label(dev_all)
    masked = by_label(load(data, "ewt-test-masked"))
    rare = sum(1 for r in test.values() if r["arcs"] < MIN_ARCS)
    rep = replication(test, dev)
    best, groups, misses, objects = where_objects_look(data)
    lines = [
        "# Experiment 8 on natural text: all-MiniLM-L6-v2 on UD English EWT",
        "",
        f"Written by `scripts/experiments/experiment-8.sh` (MiniLM's four EWT readings: {seconds} s "
        "on the machine that ran them). One model, so every interval is over sentences: a "
        "bootstrap of the scored sentences, 1000 resamples. Test set: "
        f"{test_all['sentences']} sentences, {test_all['arcs']} arcs; dev set: "
        f"{dev_all['sentences']} sentences, {dev_all['arcs']} arcs. The {len(test) - rare} UD "
        f"labels with at least {MIN_ARCS} arcs in the test set are here; the {rare} rarer ones "
        "are in each `relations.json`.",
        "",
        "## Every label, both directions (EWT test, whole sentences; EWT dev beside it)",
        "",
        "Columns: the label's arcs in the test set; MiniLM's best head (layer-head, score, 95% "
        "interval; **bold** where it beats the offset in at least 97.5% of the resamples); the "
        "best fixed offset's score (interval) and offset; the best head's margin over the offset "
        "(interval); how many of the 72 heads beat the offset on all sentences (and in 97.5% of "
        "the resamples); the best head by Clark et al.'s rule, which leaves a word's attention "
        "to itself out of its most-attended word (headlab's rule counts it; **bold** where it "
        "beats the offset on all sentences); on the dev set, its best head, score, offset and "
        "margin, and whether the best head is the test set's.",
        "",
        "| label | direction | arcs | best head | offset baseline | margin | heads above (clearly) | Clark's rule | dev: best head against offset, margin |",
        "| --- | --- | ---: | --- | --- | --- | --- | --- | --- |",
    ]
    lines += main_rows(test, dev)
    lines += [
        "",
        f"**Dev-set replication.** Over the {rep['cells']} label-direction cells with at least "
        f"{MIN_ARCS} arcs in both sets: the best head is the same head in {rep['same_head']}; "
        f"the best head beats the offset clearly in {rep['above_test']} on the test set, "
        f"{rep['above_both']} of them on the dev set too; {rep['above_dev_only']} cells beat it "
        "clearly on the dev set only.",
        "",
        "![MiniLM's best head per UD label on EWT test and dev, against the offset](minilm-ewt-relations.png)",
        "",
        "## Where the best object head looks (EWT test)",
        "",
    ]
    adjacent, apart = groups[True], groups[False]
    top = "; ".join(f"{k} {v}" for k, v in sorted(misses.items(), key=lambda kv: -kv[1])[:6])
    lines += [
        f"{head_name(best)}, the best object-to-verb head, on all {objects} objects. The object's "
        "phrase is its subtree (its determiner, adjectives, ...), its first word the subtree's "
        "leftmost. Where the verb stands just before the phrase, finding the verb and finding "
        "the word before the phrase are the same thing; where something else stands between "
        "(an indirect object, an adverb, a particle), they differ.",
        "",
        "Each share with its 95% interval (Wilson's, over objects).",
        "",
        "| objects | count | attends to the verb | to the word just before the phrase | to the object or a word of its phrase |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name, group in [("verb just before the phrase", adjacent), ("something between", apart)]:
        n = group["arcs"]
        lines.append(
            f"| {name} | {n} | {wilson(group['verb'], n)} | "
            f"{wilson(group['before_phrase'], n)} | {wilson(group['inside'], n)} |"
        )
    lines += ["", f"Its misses, by what it attends to instead: {top}.", ""]
    lines += [
        "## Whole sentences or masked ones (EWT test)",
        "",
        "Each label's best head on whole sentences and on sentences with 15% of the words "
        "masked as in training (`--relations-masked`), with how many heads beat the offset in "
        "97.5% of the resamples.",
        "",
        "| label | arcs | offset | dep -> head, whole | dep -> head, masked | head -> dep, whole | head -> dep, masked |",
        "| --- | ---: | ---: | --- | --- | --- | --- |",
    ]
    lines += masked_rows(test, masked)
    lines += [
        "",
        "## Clark et al.'s BERT-base figures beside MiniLM's",
        "",
        "UD labels mapped to the Stanford dependencies Clark et al. (2019) scored on the WSJ "
        "Penn Treebank (`CLARK_LABELS` in scripts/experiments/experiment8_natural.py), in the "
        "direction their head reads. Their text, treebank, tokenizer and model differ, so the "
        "column is a landmark. Clark et al. leave a word's attention to itself out of its "
        "most-attended word; headlab counts it: the column \"by their rule\" is MiniLM's best "
        "head scored their way, the one to set beside theirs. "
        + (CLARK_SOURCE or "Their figures are not filled in."),
        "",
        "| UD label (our direction) | their label | arcs (EWT test) | MiniLM best head | by their rule | offset | Clark et al., BERT-base: head, accuracy (offset baseline) |",
        "| --- | --- | ---: | --- | --- | ---: | --- |",
    ]
    lines += clark_rows(test)
    lines += [
        "",
        "## Where the attention rests (test / dev)",
        "",
        "Per layer, the mean share of a word's attention on `[CLS]`, on `[SEP]` and on the "
        "treebank's punctuation (`summary.json`'s `special_attention`).",
        "",
        "| layer | [CLS] | [SEP] | punctuation |",
        "| ---: | --- | --- | --- |",
    ]
    lines += special_rows(data)
    out = data.parent / "minilm-ewt.md"
    out.write_text("\n".join(lines) + "\n")
    figure(test, dev, data.parent / "minilm-ewt-relations")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
