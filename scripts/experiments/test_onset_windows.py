#!/usr/bin/env python3
"""onset_windows.py: the onsets every committed record of experiment 9 holds from the Rust
(crates/inspect/src/measures/onset.rs) come out the same from the Python, and the second
fall is found on curves with a known shape, and not on a curve with one fall. Standard
library only; scripts/check/test.sh runs it.

    python3 -B -m unittest discover --start-directory scripts/experiments --pattern 'test_*.py'
"""

import json
import math
import unittest
from pathlib import Path

import onset_windows

RECORDS = Path(__file__).resolve().parents[2] / "docs/experiments"


def log_steps() -> list:
    """Ten snapshots a decade from step 1 to 100000, rounded, repeats dropped (as onset.rs's
    tests space them)."""
    steps = []
    for k in range(51):
        step = round(10 ** (k / 10))
        if not steps or steps[-1] != step:
            steps.append(step)
    return steps


def logistic(step: int, centre: float, width: float, height: float) -> float:
    """A logistic rise of `height` centred at `centre` (a step), `width` decades wide."""
    x = (math.log10(step) - math.log10(centre)) / width
    return height / (1 + math.exp(-x))


def decades_apart(step: int, centre: float) -> float:
    return abs(math.log10(step) - math.log10(centre))


class TheRustOnsets(unittest.TestCase):
    def test_every_record_s_onsets_come_out_the_same(self):
        records = sorted(RECORDS.glob("syntax*/*.json"))
        self.assertGreater(len(records), 0, f"no records under {RECORDS}")
        for path in records:
            record = json.loads(path.read_text())
            curve = lambda key: [(c["step"], c[key]) for c in record["curves"]]
            found = {
                "syntactic": onset_windows.onset(curve("syntactic")),
                "syntactic_replicated": onset_windows.onset(curve("replicated")),
                "loss_fall": onset_windows.fall(curve("held_out_loss")),
            }
            for key, want in record["onsets"].items():
                got = found[key]
                self.assertIsNotNone(got, f"{path.name}: {key}")
                for field in ["step", "from_step", "to_step"]:
                    self.assertEqual(got[field], want[field], f"{path.name}: {key}.{field}")
                for field in ["rise", "rise_per_decade"]:
                    self.assertAlmostEqual(got[field], want[field], 12, f"{path.name}: {key}")


class TheSecondFall(unittest.TestCase):
    def test_a_loss_that_falls_twice_has_its_second_fall_at_the_second_centre(self):
        # A fast fall of 2.5 nats at step 70, a plateau, and a slower fall of 2 at 1000.
        loss = [
            (s, 9.0 - logistic(s, 70, 0.1, 2.5) - logistic(s, 1000, 0.2, 2.0))
            for s in log_steps()
        ]
        first = onset_windows.fall(loss)
        self.assertLess(decades_apart(first["step"], 70), 0.06, first)
        second = onset_windows.second_fall(loss)
        self.assertIsNotNone(second)
        self.assertLess(decades_apart(second["step"], 1000), 0.06, second)
        self.assertGreaterEqual(second["from_step"], first["to_step"])
        self.assertTrue(0.5 < second["rise"] < 2.0, second)
        self.assertLessEqual(second["plateau_per_decade"] * 2, second["rise_per_decade"])

    def test_one_fall_has_no_second_however_its_tail_falls(self):
        # The windows after the fall fall ever more slowly: the tail, not a second fall.
        loss = [(s, 9.0 - logistic(s, 70, 0.3, 3.0)) for s in log_steps()]
        self.assertIsNotNone(onset_windows.fall(loss))
        self.assertIsNone(onset_windows.second_fall(loss))
        # A flat curve has no fall at all.
        self.assertIsNone(onset_windows.second_fall([(s, 5.0) for s in log_steps()]))

    def test_a_second_fall_barely_faster_than_its_plateau_is_none(self):
        # Hand-worked, one window a snapshot (each a decade on): falls of 3 (10 to 100, the
        # first), then 0.4, then 0.6: the steepest after the first is 1000 to 10000, its
        # plateau 0.4 a decade, and 0.6 < 2 * 0.4. With 0.9 instead it is a second fall.
        steps = [10, 100, 1000, 10000]
        self.assertIsNone(onset_windows.second_fall(list(zip(steps, [9.0, 6.0, 5.6, 5.0]))))
        second = onset_windows.second_fall(list(zip(steps, [9.0, 6.0, 5.6, 4.7])))
        self.assertEqual((second["from_step"], second["to_step"], second["step"]), (1000, 10000, 3162))
        self.assertAlmostEqual(second["rise"], 0.9)
        self.assertAlmostEqual(second["plateau_per_decade"], 0.4)


if __name__ == "__main__":
    unittest.main()
