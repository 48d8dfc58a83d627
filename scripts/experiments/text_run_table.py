"""A text run's figures for the book (docs/text-models.md): the held-out loss and accuracy at
every evaluation (metrics.jsonl), and, from its report (inspect/relations.json), every UD
label of at least 100 arcs with its best head's score beside the best fixed offset's.

    headlab train configs/text.toml && headlab inspect runs/text
    python3 scripts/experiments/text_run_table.py runs/text
"""
import json
import pathlib
import sys


def main(run: pathlib.Path) -> None:
    print("| step | held-out loss (nats) | held-out accuracy | elapsed s |")
    print("| --- | --- | --- | --- |")
    for line in (run / "metrics.jsonl").read_text().splitlines():
        record = json.loads(line)
        if "eval_loss" in record:
            print(f"| {record['step']} | {record['eval_loss']:.3f} | "
                  f"{record['eval_token_acc']:.1%} | {record['elapsed_s']:.0f} |")
    relations = json.loads((run / "inspect" / "relations.json").read_text())["relations"]
    print()
    print("| label | arcs | best head | its score | best offset | its score |")
    print("| --- | --- | --- | --- | --- | --- |")
    beating = []
    kept = [r for r in relations if r["arcs"] >= 100]
    for relation in kept:
        best = max(relation["best"].values(), key=lambda b: b["score"])
        offset = relation["baseline"]
        if best["beats_baseline"]:
            beating.append(relation["relation"])
        print(f"| {relation['relation']} | {relation['arcs']} | L{best['layer']}H{best['head']} "
              f"| {best['score']:.3f} | {offset['offset']:+d} | {offset['score']:.3f} |")
    print()
    print(f"{len(beating)} of {len(kept)} labels have a head beating their best offset: "
          f"{', '.join(beating) or 'none'}")


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1]))
