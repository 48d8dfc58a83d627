"""The book's statistics for the scripts: means with 95% Student's t intervals over seeds
(or sentences), and shares with 95% Wilson score intervals, computed by `headlab sweep
stats`, the code every sweep report's tables use, so no script keeps a t table or a Wilson
formula of its own.

    from headlab_stats import intervals, show, shares, show_share
    cells = intervals({"best head": [0.8, 0.7, 0.9]})
    show(cells["best head"], 2)      # "0.80 ± 0.12"
    counts = shares({"verb": (8, 10)})
    show_share(counts["verb"])       # "80% (49% to 94%)"
    tables = multi_bootstraps({"det": ([[1, 2], [2, 2]], [[2, 2], [2, 2]])})
    show_bootstrap(tables["det"], 2) # seeds by sentences: "0.88 (0.50 to 1.00)"

The binary: $HEADLAB, else $CARGO_TARGET_DIR/release/headlab, else target/release/headlab in
this checkout (`cargo build --release -p headlab` builds it).
"""

import json
import math
import os
import subprocess
from pathlib import Path


def headlab() -> Path:
    """The `headlab` binary to run, or an error saying where it was looked for."""
    if os.environ.get("HEADLAB"):
        path = Path(os.environ["HEADLAB"])
        where = "$HEADLAB"
    else:
        root = next(p for p in Path(__file__).resolve().parents if (p / "Cargo.toml").is_file())
        target = Path(os.environ.get("CARGO_TARGET_DIR") or root / "target")
        path = target / "release" / "headlab"
        where = "$CARGO_TARGET_DIR/release" if os.environ.get("CARGO_TARGET_DIR") else "target/release"
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise SystemExit(
            f"headlab_stats: no headlab binary at {path} ({where}); build it with "
            "`cargo build --release -p headlab`, or set HEADLAB to its path"
        )
    return path


def intervals(groups: dict) -> dict:
    """Per name, the mean and 95% interval of its values, from one run of `headlab sweep
    stats`: name -> {"n", "mean", "ci95"} (ci95, the interval's half-width, None for a single
    value), as report.json writes every estimate. Every list must be non-empty and every value a finite number."""
    # JSON cannot carry NaN or infinity: name them here; headlab refuses everything else.
    for name, values in groups.items():
        for at, value in enumerate(values):
            if isinstance(value, float) and not math.isfinite(value):
                raise ValueError(f"headlab_stats: {name!r}, value {at}: {value} is not finite")
    return _stats(groups)


def shares(counts: dict) -> dict:
    """Per name, the share `hits / n` of its count `(hits, n)` with its 95% Wilson score
    interval, from one run of `headlab sweep stats`: name -> {"n", "hits", "share",
    "wilson95": [low, high]}. A count with n = 0 has no share: leave it out."""
    request = {name: {"hits": int(hits), "of": int(n)} for name, (hits, n) in counts.items()}
    return _stats(request)


def multi_bootstraps(tables: dict, draws: int = 2000) -> dict:
    """Per name, the Multi-Bootstrap of a table of seeds by examples (Sellam et al. 2022: seeds
    and examples resampled together), from one run of `headlab sweep stats`. A table is
    `(hits, of)`, two lists with one list per seed of the same examples' counts (its hits over
    its of), or one such list of values (their mean). name -> {"seeds", "examples",
    "estimate", "multi_bootstrap95": [low, high], "draws", "undefined_draws", "over_seeds"}
    (the last the t interval over the seeds' own statistics, as `intervals` gives it)."""
    request = {}
    for name, table in tables.items():
        if isinstance(table, tuple):
            hits, of = table
            request[name] = {"hits": hits, "of": of}
        else:
            request[name] = table
    return _stats(request, ["--draws", str(draws)])


def show_bootstrap(result: dict, digits: int) -> str:
    """`estimate (low to high)` with `digits` decimals: a Multi-Bootstrap as the book writes it."""
    low, high = result["multi_bootstrap95"]
    return f"{result['estimate']:.{digits}f} ({low:.{digits}f} to {high:.{digits}f})"


def show_share(share: dict) -> str:
    """`share (low to high)` in whole percentages, as the book's tables write a share."""
    low, high = share["wilson95"]
    return f"{share['share']:.0%} ({low:.0%} to {high:.0%})"


def _stats(request: dict, options: list = ()) -> dict:
    result = subprocess.run(
        [headlab(), "sweep", "stats", *options, "-"],
        input=json.dumps(request),
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise ValueError(f"headlab_stats: headlab sweep stats: {result.stderr.strip()}")
    return json.loads(result.stdout)


def show(interval: dict, digits: int) -> str:
    """`mean ± ci95` with `digits` decimals, just the mean for one value: as the sweep
    reports write it (an estimate of `intervals` or of report.json)."""
    if interval["ci95"] is None:
        return f"{interval['mean']:.{digits}f}"
    return f"{interval['mean']:.{digits}f} ± {interval['ci95']:.{digits}f}"
