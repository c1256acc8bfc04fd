"""Where one HMASD update's time goes: the preset's batch (one round, sampled by the untrained
policy as ``bench.bench_update`` does), the trainer's ``update`` timed in this process and split by
phase with wrappers around its methods: the round's preparation, the minibatch losses and their
backward, the coordinator's KL bound, and the rest (plan, clipping, Adam). The figures behind
docs/lab/hmasd.md's entry "where the bf16 update's time goes" (2026-12-02)::

    python -m bench.experiments.hmasd_update_phases [--precision fp32 bf16] [--threads 2] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import defaultdict
from pathlib import Path

import torch

import rl_system.algos.hmasd.trainer as hmasd_trainer
from bench.bench_update import build
from rl_system.algos.precision import update_autocast
from rl_system.config import load_config

PRESET = Path(__file__).resolve().parents[2] / "launch" / "configs" / "alice_bob_hmasd.yaml"
PHASES = ("prepare", "_high_kl")


def timed(spent: dict[str, float], name: str, fn):
    """``fn`` adding its wall seconds to ``spent[name]`` on every call."""
    def wrapper(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[name] += time.perf_counter() - t0
    return wrapper


def measure(precision: str, threads: int, repeats: int) -> dict[str, float]:
    """Milliseconds per update: ``update`` (the median) and each phase (the mean)."""
    torch.set_num_threads(threads)
    trainer, batch = build(load_config(str(PRESET), [f"learner.precision={precision}"]))
    spent: dict[str, float] = defaultdict(float)
    for name in PHASES:
        setattr(trainer, name, timed(spent, name, getattr(trainer, name)))
    losses = hmasd_trainer.minibatch_losses
    hmasd_trainer.minibatch_losses = timed(spent, "losses_and_backward", losses)
    try:
        def update() -> float:
            t0 = time.perf_counter()
            with update_autocast("cpu", precision == "bf16"):
                trainer.update(batch, 0.0)
            return time.perf_counter() - t0

        update(), update()  # warm-up: allocator, first-call paths
        spent.clear()
        totals = [update() for _ in range(repeats)]
    finally:
        hmasd_trainer.minibatch_losses = losses
    row = {name: s / repeats * 1e3 for name, s in spent.items()}
    row["update"] = statistics.median(totals) * 1e3
    row["rest"] = sum(totals) / repeats * 1e3 - sum(s / repeats * 1e3 for s in spent.values())
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("::")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--precision", nargs="+", choices=["fp32", "bf16"], default=["fp32", "bf16"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    print("| precision | update (median) | preparation | losses and backward | KL bound | rest |")
    print("|---|---:|---:|---:|---:|---:|")
    for precision in args.precision:
        r = measure(precision, args.threads, args.repeats)
        print(f"| {precision} | {r['update']:.0f} ms | {r.get('prepare', 0):.0f} ms | "
              f"{r.get('losses_and_backward', 0):.0f} ms | {r.get('_high_kl', 0):.0f} ms | {r['rest']:.0f} ms |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
