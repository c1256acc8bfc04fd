"""The kernel figures behind two choices in the learner: PyTorch's CPU ``tanh`` against
``sigmoid`` and against the MLPs' sigmoid-based tanh (:mod:`rl_system.algos.activations`), and
bfloat16 against float32, as a matmul and as whole updates under ``torch.autocast``
(``learner.precision``).

    python -m bench.bench_kernels [--threads 1] [--configs minatar_breakout_ppo alice_bob_hmasd]

Prints three tables (µs per call, GFLOP/s, ms per update); each figure is the median of repeats.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

from bench.bench_update import REPO, build
from bench.report import stamp
from rl_system.algos.activations import Tanh, sigmoid_tanh
from rl_system.config import load_config


def median_us(fn: Callable[[], object], repeats: int = 1000) -> float:
    for _ in range(20):
        fn()
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(repeats // 5):
            fn()
        times.append((time.perf_counter() - t0) / (repeats // 5) * 1e6)
    return statistics.median(times)


def activation_rows() -> list[tuple[str, str, float]]:
    """``(shape, kernel, µs)``: forward alone, then forward + backward."""
    rows = []
    for rows_, cols in ((512, 64), (4096, 64)):
        x = torch.randn(rows_, cols)
        shape = f"{rows_}x{cols}"
        rows += [(shape, "torch.tanh", median_us(lambda: torch.tanh(x))),
                 (shape, "torch.sigmoid", median_us(lambda: torch.sigmoid(x))),
                 (shape, "2*sigmoid(2x)-1", median_us(lambda: sigmoid_tanh(x)))]
        for name, act in (("torch.tanh fwd+bwd", torch.tanh), ("Tanh module fwd+bwd", Tanh())):
            leaf = x.clone().requires_grad_()
            rows.append((shape, name, median_us(lambda: act(leaf).sum().backward(), 500)))
    x = torch.linspace(-10, 10, 100_001)
    err = float((sigmoid_tanh(x) - torch.tanh(x)).abs().max())
    rows.append(("100,001 points in [-10, 10]", "max |2*sigmoid(2x)-1 - tanh(x)|", err))
    return rows


def matmul_rows(n: int = 1024) -> list[tuple[str, float]]:
    out = []
    for dtype in (torch.float32, torch.bfloat16):
        a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
        us = median_us(lambda: torch.mm(a, b), 50)
        out.append((str(dtype).removeprefix("torch."), 2 * n ** 3 / us / 1e3))
    return out


def update_rows(configs: list[str], repeats: int) -> list[tuple[str, str, float]]:
    """``(config, precision, ms)``: the median update of one round's batch, fp32 and bf16 autocast."""
    out = []
    for name in configs:
        trainer, batch = build(load_config(str(REPO / "launch" / "configs" / f"{name}.yaml")))
        for precision in ("fp32", "bf16"):
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
                trainer.update(batch, 0.0)
                times = []
                for _ in range(repeats):
                    t0 = time.perf_counter()
                    trainer.update(batch, 0.0)
                    times.append(time.perf_counter() - t0)
            out.append((name, precision, statistics.median(times) * 1e3))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--configs", nargs="+", default=["minatar_breakout_ppo", "alice_bob_hmasd", "cartpole_ppo"])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    s = stamp()
    print(f"Measured {s['date_utc']} at commit `{s['commit']}` on {s['cpu']} ({s['cores']} cores), torch {s['torch']}, "
          f"{args.threads} thread(s), CPU bf16 kernels: {torch.ops.mkldnn._is_mkldnn_bf16_supported()}.\n")
    print("| tensor | kernel | µs (or error) |\n|---|---|---:|")
    for shape, kernel, value in activation_rows():
        print(f"| {shape} | {kernel} | {value:.3g} |")
    print("\n| matmul 1024² | GFLOP/s |\n|---|---:|")
    for dtype, rate in matmul_rows():
        print(f"| {dtype} | {rate:,.0f} |")
    print("\n| config | precision | update (median) |\n|---|---|---:|")
    for name, precision, ms in update_rows(args.configs, args.repeats):
        print(f"| {name} | {precision} | {ms:,.1f} ms |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
