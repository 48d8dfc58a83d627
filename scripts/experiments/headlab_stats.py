"""The book's one statistic for the scripts: means with 95% Student's t intervals over seeds
(or sentences), computed by `headlab sweep stats`, the code every sweep report's tables use,
so no script keeps a t table of its own.

    from headlab_stats import intervals, show
    cells = intervals({"best head": [0.8, 0.7, 0.9]})
    show(cells["best head"], 2)      # "0.80 ± 0.12"

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
    result = subprocess.run(
        [headlab(), "sweep", "stats", "-"],
        input=json.dumps(groups),
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
