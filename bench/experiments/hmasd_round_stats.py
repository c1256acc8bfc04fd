"""Per-run round statistics of HMASD (and flat MAPPO) runs from their TensorBoard scalars: how the
coordinator's KL bound acted (steps kept of the round's epochs, rounds cut short, rounds with a
step halved), the mean update and sampling seconds per round, and the largest fall of the training
return below the best of its attempt so far (a reseed on stall, read from ``summary.json``, starts
a new attempt): what ``rollback.drop`` is compared with. The figures behind docs/lab/hmasd.md's
entries on the shipped preset and on rollback on collapse (2026-11-29)::

    python -m bench.experiments.hmasd_round_stats RUN_DIR [RUN_DIR ...] [--epochs 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from bench.tb_scalars import read_scalars
from rl_system.observe.metrics import RETURN_MEAN, ROLLOUT, SYSTEM, UPDATE_S


def largest_fall(returns: dict[int, float], reseeds: list[int]) -> tuple[float, int | None]:
    """The largest ``best so far - return`` over the logged rounds (``{env steps: mean return}``),
    the best restarting at each reseed's env steps, and the env steps where it was."""
    best, fall, at, before = float("-inf"), 0.0, None, 0
    for step in sorted(returns):
        if any(before < r <= step for r in reseeds):
            best = float("-inf")
        before, best = step, max(best, returns[step])
        if best - returns[step] > fall:
            fall, at = best - returns[step], step
    return fall, at


def round_stats(run_dir: Path, epochs: int) -> str:
    """One line for ``run_dir``: rounds, fewest coordinator steps kept, rounds with none kept, rounds
    cut short after a kept step, rounds with a step halved (``-`` for flat MAPPO), mean update and
    sampling seconds, the largest fall below the attempt's best and where."""
    sc = read_scalars(run_dir)
    summary = run_dir / "summary.json"
    reseeds = [r["env_steps"] for r in json.loads(summary.read_text())["reseeds"]] if summary.exists() else []
    fall, at = largest_fall(sc[ROLLOUT + RETURN_MEAN], reseeds)
    rounds = len(sc[SYSTEM + UPDATE_S])
    if "train/high_steps_kept" in sc:
        kept = list(sc["train/high_steps_kept"].values())
        halved = list(sc["train/high_step_halvings"].values())
        bound = (f"{min(kept):.0f} | {sum(k == 0 for k in kept)} | {sum(0 < k < epochs for k in kept)} "
                 f"| {sum(h > 0 for h in halved)}")
    else:  # flat MAPPO: no coordinator, no bound
        bound = "- | - | - | -"
    return (f"{run_dir.name} | {rounds} | {bound} "
            f"| {statistics.mean(sc['system/update_s'].values()):.2f} "
            f"| {statistics.mean(sc['system/sample_s'].values()):.2f} "
            f"| {fall:.2f} | {f'{at:,}' if at is not None else '-'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--epochs", type=int, default=5, help="coordinator steps in a full round (hmasd.num_epochs "
                                                          "x num_minibatches)")
    args = ap.parse_args()
    print("run | rounds | fewest steps kept | rounds with none kept | rounds cut short | rounds with a step "
          "halved | update s | sample s | largest fall below the attempt's best | at env steps")
    print("---|---:|---:|---:|---:|---:|---:|---:|---:|---:")
    for run in args.runs:
        try:
            print(round_stats(run, args.epochs))
        except (KeyError, ValueError) as err:  # no such folder, or not an HMASD run with the bound
            raise SystemExit(f"error: {run}: no HMASD or MAPPO round scalars ({err})") from None


if __name__ == "__main__":
    main()
