"""Reading stored ``python -m bench.bench_hmasd`` outputs (``bench/results/hmasd/``): the run rows
of the table whose header starts ``method | seed``, and the date and commit each transcript's
``# == <date> · <commit> · ...`` heading names."""

from __future__ import annotations

import re
import statistics
from pathlib import Path
from typing import Any

from bench.harness.results import RESULTS, read_text
from bench.harness.stamp import ROOT

HEADER = ("method", "seed")
PRESET_SEEDS = RESULTS / "hmasd" / "shrink"
"""The HMASD preset's twenty seeds in float32 (docs/hmasd.md's table of them): README's HMASD row and
the benchmark report's HMASD section read them."""
_HEADING = re.compile(r"^# == (\d{4}-\d{2}-\d{2}) · ([0-9a-f]{7,}(?:\+dirty)?) ·")


def run_rows(path: Path) -> list[dict[str, str]]:
    """The run rows of one output, as ``{column: cell}``."""
    rows, header = [], None
    for line in read_text(path).splitlines():
        cells = [c.strip() for c in line.split("|")]
        if tuple(cells[:2]) == HEADER:
            header = cells
        elif header and len(cells) == len(header) and cells[1].isdigit():
            rows.append(dict(zip(header, cells)))
        elif not line.strip():
            header = None
    return rows


def heading(path: Path) -> tuple[str, str] | None:
    """``(date, commit)`` of the transcript's first ``# ==`` heading, if it has one."""
    for line in read_text(path).splitlines():
        m = _HEADING.match(line)
        if m:
            return m.group(1), m.group(2)
    return None


def summary(outputs: Path) -> dict[str, Any]:
    """A folder of one preset's seeds, summarised from their stored ``bench_hmasd`` outputs (not
    rerun: hours of compute): how many final policies and ``best.json`` checkpoints test >= 0.8 and
    their mean, the runs that fell below 0.5 training success after first reaching 0.9, and the
    commits the seeds ran at."""
    source = outputs.relative_to(ROOT).as_posix() if outputs.is_relative_to(ROOT) else str(outputs)
    out: dict[str, Any] = {"stored": True, "source": source, "rows": []}
    paths = sorted(outputs.glob("s[0-9]*.txt*"))
    rows = [r for p in paths for r in run_rows(p)]
    if not rows:
        out["error"] = f"{source}: no bench_hmasd outputs (s<seed>.txt)"
        return out
    final = [float(r["test success"]) for r in rows]
    best = [float(r["best.json test success"]) for r in rows]
    fell = sum(r.get("lowest after", "-") not in ("-", "") and float(r["lowest after"]) < 0.5 for r in rows)
    out["commits"] = sorted({h[1] for h in map(heading, paths) if h})
    out["seeds"] = len(final)
    out["fell_after_solving"] = fell  # runs whose training success fell below 0.5 after first 0.9
    cmd = "python -m bench.bench_hmasd --size default --steps 3000000 --seeds N --methods hmasd"
    out["rows"] = [
        {"figure": "final policy, test success (both levels sampled)", "passed": sum(v >= 0.8 for v in final),
         "seeds": len(final), "mean": statistics.fmean(final), "command": cmd},
        {"figure": "`best.json` checkpoint, test success", "passed": sum(v >= 0.8 for v in best),
         "seeds": len(best), "mean": statistics.fmean(best), "command": cmd + "; rl-system eval RUN --pick best"},
    ]
    return out
