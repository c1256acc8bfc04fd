"""Do two runs follow the same trajectory? Compares the checkpoints two runs kept at the same policy
versions: the largest absolute difference of any weight, and whether the optimiser states and the
env-step counters agree. The first version that differs is where the runs parted.

    rl-system train CONFIG --set seed=13 --set checkpoint.every_rounds=5 --set checkpoint.keep_last=1000 \\
        --run-dir runs/a        # and again with --run-dir runs/b (same commit, or another checkout)
    python -m bench.compare_runs runs/a runs/b
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import torch

from rl_system.checkpoint import keys, load_checkpoint

VERSION = re.compile(r"ckpt-v(\d+)\.rlck$")


def checkpoints(run: Path) -> dict[int, Path]:
    """Policy version -> checkpoint file of a run directory (or its ``checkpoints/``)."""
    folder = run / "checkpoints" if (run / "checkpoints").is_dir() else run
    return {int(m.group(1)): f for f in folder.glob("ckpt-v*.rlck") if (m := VERSION.search(f.name))}


def max_abs_diff(a: dict, b: dict) -> float:
    """Largest absolute difference over the tensors of two nested state dicts (inf where the
    structure or a shape differs)."""
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        if a.shape != b.shape:
            return float("inf")
        return float((a.double() - b.double()).abs().max()) if a.numel() else 0.0
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            return float("inf")
        return max((max_abs_diff(a[k], b[k]) for k in a), default=0.0)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            return float("inf")
        return max((max_abs_diff(x, y) for x, y in zip(a, b)), default=0.0)
    return 0.0 if a == b else float("inf")


def trainer_state(state: dict) -> dict:
    """A checkpoint's trainer state in today's layout: ``{"optimizer": ..., ...}`` (HMASD's
    checkpoints before the update core owned the optimiser held its bare state)."""
    return state if "optimizer" in state else {"optimizer": state}


def compare(run_a: Path, run_b: Path) -> list[tuple[int, int, float, float]]:
    """``(version, env steps, weights' max |diff|, optimiser's max |diff|)`` at every version both
    runs kept, in order."""
    a, b = checkpoints(run_a), checkpoints(run_b)
    rows = []
    for version in sorted(set(a) & set(b)):
        sa, _ = load_checkpoint(str(a[version]))
        sb, _ = load_checkpoint(str(b[version]))
        la, lb = sa[keys.LEARNER], sb[keys.LEARNER]
        steps = la[keys.ENV_STEPS] if la[keys.ENV_STEPS] == lb[keys.ENV_STEPS] else -1
        rows.append((version, steps, max_abs_diff(la[keys.MODEL], lb[keys.MODEL]),
                     max_abs_diff(trainer_state(la[keys.OPTIMIZER]), trainer_state(lb[keys.OPTIMIZER]))))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run_a", type=Path)
    ap.add_argument("run_b", type=Path)
    args = ap.parse_args()
    rows = compare(args.run_a, args.run_b)
    if not rows:
        raise SystemExit("compare_runs: the two runs kept no checkpoint at the same policy version")
    print("version | env steps | weights max |diff| | optimiser max |diff|")
    print("---|---|---|---")
    for version, steps, dw, do in rows:
        print(f"{version} | {'differ' if steps < 0 else f'{steps:,}'} | {dw:.3g} | {do:.3g}")
    parted = next((r for r in rows if r[2] > 0 or r[3] > 0 or r[1] < 0), None)
    print(f"\nidentical at all {len(rows)} common versions" if parted is None
          else f"\nfirst difference at version {parted[0]} (last identical: "
               f"{max((r[0] for r in rows if r[0] < parted[0]), default='none')})")


if __name__ == "__main__":
    main()
