"""Per-run round statistics of HMASD runs from their TensorBoard scalars: how the coordinator's KL
bound acted (steps kept of the round's epochs, rounds cut short, rounds with a step halved) and the
mean update and sampling seconds per round. The figures behind docs/hmasd.md, "The shipped preset"::

    python -m bench.hmasd_round_stats RUN_DIR [RUN_DIR ...] [--epochs 5]
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from bench.tb_scalars import read_scalars


def round_stats(run_dir: Path, epochs: int) -> str:
    """One line for ``run_dir``: rounds, fewest coordinator steps kept, rounds with none kept, rounds
    cut short after a kept step, rounds with a step halved, mean update and sampling seconds."""
    sc = read_scalars(run_dir)
    kept = list(sc["train/high_steps_kept"].values())
    halved = list(sc["train/high_step_halvings"].values())
    return (f"{run_dir.name} | {len(kept)} | {min(kept):.0f} | {sum(k == 0 for k in kept)} "
            f"| {sum(0 < k < epochs for k in kept)} | {sum(h > 0 for h in halved)} "
            f"| {statistics.mean(sc['system/update_s'].values()):.2f} "
            f"| {statistics.mean(sc['system/sample_s'].values()):.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--epochs", type=int, default=5, help="coordinator steps in a full round (hmasd.num_epochs "
                                                          "x num_minibatches)")
    args = ap.parse_args()
    print("run | rounds | fewest steps kept | rounds with none kept | rounds cut short | rounds with a step "
          "halved | update s | sample s")
    print("---|---:|---:|---:|---:|---:|---:|---:")
    for run in args.runs:
        try:
            print(round_stats(run, args.epochs))
        except (KeyError, ValueError) as err:  # no such folder, or not an HMASD run with the bound
            raise SystemExit(f"error: {run}: no HMASD round scalars ({err})") from None


if __name__ == "__main__":
    main()
