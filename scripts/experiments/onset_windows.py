"""Onsets over training in Python: the window rule of crates/inspect/src/measures/onset.rs
(which `headlab inspect` uses for the onsets it records), and the loss's second fall, which
experiment 9 defined after reading six seeds (docs/experiment-9-syntax.md).

The window rule, as onset.rs states it: steps on a log scale, step 0 and values that are not
finite left out; a window runs from a snapshot to the first later one at least a quarter of a
decade on; its rate is its rise per decade; the onset is the window of the highest rate above
0, at the window's geometric midpoint. A fall is the onset of the curve turned over.
test_onset_windows.py checks that this module gives the onsets every committed record of
experiment 9 holds from the Rust.

**The second fall**, fixed on 2026-11-30 after seeds 0 to 5 and before any later seed was
read: among the windows that start at or after the end of the loss's steepest fall's window,
the one of the steepest fall, provided an earlier window of that range (the plateau) falls at
most half as fast. Without such a plateau the steepest window after the first fall is that
fall's tail, and there is no second fall. Standard library only.
"""

import math

WINDOW_DECADES = 0.25
# A second fall must fall at least this many times faster than the plateau before it.
PLATEAU_RATIO = 2.0


def windows(curve: list) -> list:
    """Every window of `curve` ((step, value) pairs by step) as dicts of from_step, to_step,
    rise (the value's change across it) and rise_per_decade, in order of their start."""
    points = [
        (step, math.log10(step), value)
        for step, value in curve
        if step > 0 and value is not None and math.isfinite(value)
    ]
    found = []
    for i, (from_step, from_log, from_value) in enumerate(points):
        end = next(
            (p for p in points[i + 1 :] if p[1] - from_log >= WINDOW_DECADES - 1e-12), None
        )
        if end is None:
            break
        to_step, to_log, to_value = end
        rise = to_value - from_value
        found.append(
            {
                "step": round(math.sqrt(from_step * to_step)),
                "from_step": from_step,
                "to_step": to_step,
                "rise": rise,
                "rise_per_decade": rise / (to_log - from_log),
            }
        )
    return found


def steepest(found: list):
    """The first window of the highest rate above 0, or None (onset.rs keeps the first of
    equal rates)."""
    best = None
    for window in found:
        if window["rise_per_decade"] > 0 and (
            best is None or window["rise_per_decade"] > best["rise_per_decade"]
        ):
            best = window
    return best


def onset(curve: list):
    """The window of `curve`'s steepest rise, as onset.rs's `onset`."""
    return steepest(windows(curve))


def turned_over(curve: list) -> list:
    return [(step, None if value is None else -value) for step, value in curve]


def fall(curve: list):
    """The window of `curve`'s steepest fall, its rise the fall: onset.rs's `fall`."""
    return onset(turned_over(curve))


def second_fall(curve: list):
    """The loss's second fall (the module's docstring), with `plateau_per_decade`, the
    slowest fall per decade between the first fall and it; None without one."""
    falls = windows(turned_over(curve))
    first = steepest(falls)
    if first is None:
        return None
    after = [w for w in falls if w["from_step"] >= first["to_step"]]
    best = steepest(after)
    if best is None:
        return None
    before = [w["rise_per_decade"] for w in after if w["from_step"] < best["from_step"]]
    if not before or min(before) * PLATEAU_RATIO > best["rise_per_decade"]:
        return None
    return {**best, "plateau_per_decade": min(before)}
