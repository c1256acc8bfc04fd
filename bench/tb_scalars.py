"""A run's TensorBoard scalars as a table, without TensorBoard: one row per logged env step
(every ``--every``-th), one column per tag. For reading what moved when, e.g. the HMASD
diagnosis signals around a collapse (docs/hmasd.md)::

    python -m bench.tb_scalars runs/<run> --tags rollout/success_rate train/reward_term_team \\
        train/plan_team_skill_entropy --every 10

Tags are matched by suffix (``success_rate`` finds ``rollout/success_rate``); ``--list`` prints
every tag. Reads the event files with :func:`rl_system.observe.metrics.read_scalars`; a file cut
short by a run still writing is read up to its last whole record.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rl_system.observe.metrics import read_scalars as curves


def read_scalars(run_dir: Path) -> dict[str, dict[int, float]]:
    """``{tag: {step: value}}`` of every scalar in ``run_dir/tb`` (or ``run_dir`` itself); a step
    logged twice keeps its last value."""
    folder = run_dir / "tb" if (run_dir / "tb").is_dir() else run_dir
    return {tag: {int(step): float(value) for step, value in points} for tag, points in curves(folder).items()}


def table(scalars: dict[str, dict[int, float]], tags: list[str], every: int) -> str:
    cols = []
    for want in tags:
        found = [t for t in scalars if t == want or t.endswith("/" + want) or t.endswith(want)]
        if not found:
            raise SystemExit(f"tb_scalars: no tag matches {want!r} (--list shows them)")
        cols.append(found[0])
    steps = sorted(set().union(*(scalars[c].keys() for c in cols)))[::every]
    head = "| env steps | " + " | ".join(c.split("/", 1)[-1] for c in cols) + " |"
    rows = [head, "|" + "---:|" * (len(cols) + 1)]
    for s in steps:
        cells = [f"{scalars[c][s]:.4g}" if s in scalars[c] else "" for c in cols]
        rows.append(f"| {s:,} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--tags", nargs="+", default=["rollout/success_rate", "rollout/return_mean"])
    ap.add_argument("--every", type=int, default=1, help="print every N-th logged step")
    ap.add_argument("--list", action="store_true", help="list the tags and exit")
    args = ap.parse_args()
    scalars = read_scalars(args.run_dir)
    if not scalars:
        raise SystemExit(f"tb_scalars: no TensorBoard events under {args.run_dir}")
    if args.list:
        print("\n".join(sorted(scalars)))
        return
    print(table(scalars, args.tags, max(1, args.every)))


if __name__ == "__main__":
    main()
