"""A text run's figures for the book (docs/text-models.md): the held-out loss and accuracy at
every evaluation (metrics.jsonl), and, from its report (RUN/inspect unless REPORT is given):
every UD label of at least 100 arcs with its best head's score beside the best fixed
offset's (relations.json), and the relations over training at the snapshots of steps 1, 10,
100, 1000 and every 400th (relations-over-training.json).

    headlab train configs/text.toml && headlab inspect runs/text
    python3 scripts/experiments/text_run_table.py runs/text [REPORT]
"""
import json
import pathlib
import sys


def main(run: pathlib.Path, report: pathlib.Path) -> None:
    print("| step | held-out loss (nats) | held-out accuracy | elapsed s |")
    print("| --- | --- | --- | --- |")
    for line in (run / "metrics.jsonl").read_text().splitlines():
        record = json.loads(line)
        if "eval_loss" in record:
            print(f"| {record['step']} | {record['eval_loss']:.3f} | "
                  f"{record['eval_token_acc']:.1%} | {record['elapsed_s']:.0f} |")
    relations = json.loads((report / "relations.json").read_text())["relations"]
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
    over_training = report / "relations-over-training.json"
    if over_training.exists():
        over = json.loads(over_training.read_text())
        print()
        print("| step | syntactic | positional | labels beating their offset |")
        print("| --- | --- | --- | --- |")
        for step in over["steps"]:
            if step["step"] in (1, 10, 100, 1000) or step["step"] % 400 == 0 and step["step"]:
                print(f"| {step['step']} | {step['syntactic']:.3f} | {step['positional']:.3f} "
                      f"| {step['labels_beating_offset']} |")


if __name__ == "__main__":
    run = pathlib.Path(sys.argv[1])
    main(run, pathlib.Path(sys.argv[2]) if len(sys.argv) > 2 else run / "inspect")
