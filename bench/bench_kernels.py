"""The kernel figures behind four choices in the learner: PyTorch's CPU ``tanh`` against
``sigmoid`` and against the MLPs' sigmoid-based tanh (:mod:`rl_system.algos.activations`),
bfloat16 against float32, as a matmul and as whole updates under ``torch.autocast``
(``learner.precision``), PPO's Adam step without ``torch.optim`` (:mod:`rl_system.algos.adam`),
and the layouts of a softmax over a few actions and of a narrow layer's weight gradient
(:mod:`rl_system.algos.layouts`).

    python -m bench.bench_kernels [--threads 1] [--configs minatar_breakout_ppo alice_bob_hmasd] [--out DIR]

Prints six tables (µs per call, GFLOP/s, ms per update in each precision and with each form of
the MLPs' tanh, µs per Adam step) and the seconds ``import torch._dynamo`` takes, which
``torch.optim``'s first call pays; each figure is a median.
Writes ``kernels.json`` / ``kernels.md`` to ``--out`` (default ``bench/results/kernels/``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch

from bench.bench_update import REPO, build
from bench.harness.results import RESULTS, command_line, write_suite
from bench.harness.stamp import stamp
from bench.harness.timing import median_us
from rl_system.algos import activations, layouts
from rl_system.algos.activations import Tanh, sigmoid_tanh
from rl_system.algos.adam import FusedAdam, LoopAdam
from rl_system.algos.precision import update_autocast
from rl_system.config import load_config


def activation_rows() -> list[tuple[str, str, float]]:
    """``(shape, kernel, µs)``: forward alone, then forward + backward."""
    rows = []
    for rows_, cols in ((512, 64), (4096, 64)):
        x = torch.randn(rows_, cols)
        shape = f"{rows_}x{cols}"
        rows += [(shape, "torch.tanh", median_us(lambda: torch.tanh(x))),
                 (shape, "torch.sigmoid", median_us(lambda: torch.sigmoid(x))),
                 (shape, "2*sigmoid(2x)-1", median_us(lambda: sigmoid_tanh(x)))]
        module = f"Tanh module fwd+bwd ({'2*sigmoid(2x)-1' if activations.SIGMOID_TANH else 'torch.tanh'} on this CPU)"
        for name, act in (("torch.tanh fwd+bwd", torch.tanh), (module, Tanh())):
            leaf = x.clone().requires_grad_()
            rows.append((shape, name, median_us(lambda: act(leaf).sum().backward(), 500)))
    rows.append(("4096x64", "torch.tanh on MKL's generic code (MKL_ENABLE_INSTRUCTIONS=SSE4_2)", generic_mkl_tanh_us()))
    x = torch.linspace(-10, 10, 100_001)
    err = float((sigmoid_tanh(x) - torch.tanh(x)).abs().max())
    rows.append(("100,001 points in [-10, 10]", "max |2*sigmoid(2x)-1 - tanh(x)|", err))
    return rows


def layout_rows() -> list[tuple[str, str, float, float]]:
    """``(shape, operation, µs in PyTorch's layout, µs in the layout rl_system takes)``: the
    softmax's forward plus backward, and a weight gradient ``grad.T @ x``."""
    out = []
    for rows, n in ((4096, 2), (4096, 6), (4096, 12), (512, 2), (512, 6)):
        grad, leaf = torch.randn(rows, n), torch.randn(rows, n).requires_grad_()
        theirs = median_us(lambda: torch.log_softmax(leaf, dim=-1).backward(grad), 300)
        ours = median_us(lambda: layouts.log_softmax(leaf).backward(grad), 300)
        out.append((f"{rows}x{n}", "log_softmax fwd+bwd", theirs, ours))
    for n_out, n_in in ((32, 4), (64, 17), (32, 32), (2, 32)):
        grad, x, w = torch.randn(4096, n_out), torch.randn(4096, n_in), torch.empty(n_out, n_in)
        out.append((f"[{n_out}, 4096] @ [4096, {n_in}]", "weight grad", median_us(lambda: torch.mm(grad.t(), x, out=w), 300),
                    median_us(lambda: layouts.weight_grad(grad, x, w), 300)))
    return out


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
            with update_autocast("cpu", enabled=precision == "bf16"):
                trainer.update(batch, 0.0)
                times = []
                for _ in range(repeats):
                    t0 = time.perf_counter()
                    trainer.update(batch, 0.0)
                    times.append(time.perf_counter() - t0)
            out.append((name, precision, statistics.median(times) * 1e3))
    return out


TANH_CONFIGS = ["cartpole_ppo", "acrobot_ppo", "pendulum_ppo", "hopper_ppo", "air_combat_ppo"]


def tanh_form_rows(configs: list[str], repeats: int) -> list[tuple[str, float, float]]:
    """``(config, ms with the sigmoid form, ms with torch.tanh)``: the median update of one round's
    batch with each of :class:`~rl_system.algos.activations.Tanh`'s forms, alternated (the first
    pair a warm-up), whichever this CPU's rule picks."""
    out, rule = [], activations.SIGMOID_TANH
    try:
        for name in configs:
            trainer, batch = build(load_config(str(REPO / "launch" / "configs" / f"{name}.yaml")))
            times: dict[bool, list[float]] = {True: [], False: []}
            for rep in range(repeats + 1):
                for form in (True, False):
                    activations.SIGMOID_TANH = form
                    rows = {k: v.clone() for k, v in batch.items()}
                    t0 = time.perf_counter()
                    trainer.update(rows, 0.0)
                    if rep:
                        times[form].append(time.perf_counter() - t0)
            out.append((name, statistics.median(times[True]) * 1e3, statistics.median(times[False]) * 1e3))
    finally:
        activations.SIGMOID_TANH = rule
    return out


def optimizer_rows(configs: list[str]) -> list[tuple[str, int, str, float]]:
    """``(config, parameters, optimizer, µs)``: one Adam step over the config's policy: ``torch.optim``'s
    fused Adam and :class:`~rl_system.algos.adam.FusedAdam` (the same kernel), its default per-tensor
    loop and :class:`~rl_system.algos.adam.LoopAdam` (the same loop)."""
    out = []
    for name in configs:
        trainer, _ = build(load_config(str(REPO / "launch" / "configs" / f"{name}.yaml")))
        params = list(trainer.policy.parameters())
        for p in params:
            p.grad = torch.randn_like(p) * 1e-3
        count = sum(p.numel() for p in params)
        for label, opt in (("torch.optim.Adam(fused=True)", torch.optim.Adam(params, lr=1e-4, eps=1e-5, fused=True)),
                           ("FusedAdam", FusedAdam(params, lr=1e-4, eps=1e-5)),
                           ("torch.optim.Adam()", torch.optim.Adam(params, lr=1e-4, eps=1e-5)),
                           ("LoopAdam", LoopAdam(params, lr=1e-4, eps=1e-5))):
            out.append((name, count, label, median_us(opt.step, 200)))
    return out


def generic_mkl_tanh_us() -> float:
    """``torch.tanh`` of a ``[4096, 64]`` tensor in a fresh process whose MKL is held to SSE4.2: on
    an Intel CPU, what MKL's vector math runs on other vendors' CPUs (:mod:`rl_system.algos.activations`)."""
    code = ("import torch; from bench.harness.timing import median_us; torch.set_num_threads(%d); "
            "x = torch.randn(4096, 64); print(median_us(lambda: torch.tanh(x)))" % torch.get_num_threads())
    return fresh_process_figure(code, MKL_ENABLE_INSTRUCTIONS="SSE4_2")


def dynamo_import_s() -> float:
    """Seconds ``import torch._dynamo`` takes in a fresh process (what ``torch.optim``'s first call costs)."""
    code = "import time, torch; t = time.perf_counter(); import torch._dynamo; print(time.perf_counter() - t)"
    return fresh_process_figure(code)


def fresh_process_figure(code: str, **env: str) -> float:
    """The number ``python -c code`` prints last, run in a fresh process with ``env`` added to this
    one's environment, from the repository root (``python -c`` imports from its working directory)."""
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=120,
                         env={**os.environ, **env}, cwd=REPO)
    return float(out.stdout.strip().splitlines()[-1])


def markdown(result: dict[str, Any]) -> str:
    s = result["stamp"]
    lines = [f"`{result['command']}`", "", f"Measured {s['date_utc']} at commit `{s['commit']}` on {s['cpu']} ({s['cores']} cores), "
             f"torch {s['torch']}, {result['threads']} thread(s), CPU bf16 kernels: {result['cpu_bf16']}.", "",
             "| tensor | kernel | µs (or error) |", "|---|---|---:|"]
    lines += [f"| {shape} | {kernel} | {value:.3g} |" for shape, kernel, value in result["activations"]]
    lines += ["", "| matmul 1024² | GFLOP/s |", "|---|---:|"]
    lines += [f"| {dtype} | {rate:,.0f} |" for dtype, rate in result["matmul"]]
    lines += ["", "| config | precision | update (median) |", "|---|---|---:|"]
    lines += [f"| {name} | {precision} | {ms:,.1f} ms |" for name, precision, ms in result["updates"]]
    lines += ["", "| config | update, 2*sigmoid(2x)-1 | update, torch.tanh | ratio |", "|---|---:|---:|---:|"]
    lines += [f"| {name} | {s:,.1f} ms | {t:,.1f} ms | {t / s:.2f} |" for name, s, t in result["tanh_forms"]]
    lines += ["", f"`Tanh` on this CPU: {'2*sigmoid(2x)-1' if result['sigmoid_tanh'] else 'torch.tanh'} on large tensors "
              f"(vendor {activations.cpu_vendor() or 'unknown'})."]
    lines += ["", "| config | parameters | Adam step | µs (median) |", "|---|---:|---|---:|"]
    lines += [f"| {name} | {count:,} | {label} | {us:,.1f} |" for name, count, label, us in result["adam"]]
    lines += ["", "| tensor | operation | PyTorch's layout µs | rl_system's µs | speed-up |", "|---|---|---:|---:|---:|"]
    lines += [f"| {shape} | {op} | {a:,.1f} | {b:,.1f} | {a / b:.1f}× |" for shape, op, a, b in result["layouts"]]
    lines += ["", f"`import torch._dynamo` in a fresh process (torch.optim's first call): {result['dynamo_import_s']:.2f} s"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--configs", nargs="+", default=["minatar_breakout_ppo", "alice_bob_hmasd", "cartpole_ppo"])
    ap.add_argument("--tanh-configs", nargs="*", default=TANH_CONFIGS,
                    help="configs whose update is timed with each tanh form (none: skip)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=RESULTS / "kernels")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    command = command_line("python -m bench.bench_kernels", argv)
    result = {"stamp": stamp(), "command": command, "threads": args.threads, "cpu_bf16": torch.ops.mkldnn._is_mkldnn_bf16_supported(),
              "activations": activation_rows(), "matmul": matmul_rows(),
              "updates": update_rows(args.configs, args.repeats),
              "tanh_forms": tanh_form_rows(args.tanh_configs, max(args.repeats, 6)), "sigmoid_tanh": activations.SIGMOID_TANH,
              "adam": optimizer_rows(args.configs), "layouts": layout_rows(),
              "dynamo_import_s": dynamo_import_s()}
    text = markdown(result)
    print(text)
    write_suite(args.out, "kernels", result, text)
    return 0

if __name__ == "__main__":
    raise SystemExit(main())
