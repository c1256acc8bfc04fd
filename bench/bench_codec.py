"""Benchmark rl_system.codec on a rollout: per column, raw MB, ratio, MB/s.

    python bench/bench_codec.py [--repeat N] [--env CartPole] [--train-rounds K] [--synthetic]

By default the rollout is real: a worker collects T x N steps of ``--env`` with a policy trained
for ``--train-rounds`` rounds first (an untrained policy's rollouts compress differently from a
good one's: longer episodes, more confident log-probs).
"""
from __future__ import annotations

import argparse
import pathlib
import sys
import time

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from rl_system.codec import decode, encode  # noqa: E402

CONFIGS = [  # (label, encode kwargs)
    ("none", dict(compression="none")),
    ("lz4 L0", dict(compression="lz4", level=0)),
    ("lz4 L0 +shuf", dict(compression="lz4", level=0, shuffle=True)),
    ("lz4 L0 auto", dict(compression="lz4", level=0, shuffle="auto")),
    ("lz4 accel8", dict(compression="lz4", level=-8)),
    ("lz4 accel8 +shuf", dict(compression="lz4", level=-8, shuffle=True)),
    ("lz4 HC4", dict(compression="lz4", level=4)),
    ("lz4 HC4 +shuf", dict(compression="lz4", level=4, shuffle=True)),
    ("lz4 HC9", dict(compression="lz4", level=9)),
    ("lz4 HC9 +shuf", dict(compression="lz4", level=9, shuffle=True)),
]


def synthetic_rollout(T: int = 64, N: int = 1024, seed: int = 0) -> dict[str, torch.Tensor]:
    """CartPole-like rollout, time-major [T, N, ...]."""
    g = torch.Generator().manual_seed(seed)
    # obs: x, x_dot, theta, theta_dot as smooth random walks per env
    scale = torch.tensor([0.02, 0.05, 0.005, 0.05])
    obs = torch.cumsum(torch.randn(T, N, 4, generator=g) * scale, dim=0)
    action = torch.randint(0, 2, (T, N), generator=g, dtype=torch.int64)
    reward = torch.ones(T, N, dtype=torch.float32)
    terminated = torch.rand(T, N, generator=g) < 0.02
    truncated = torch.rand(T, N, generator=g) < 0.002
    p = torch.sigmoid(torch.randn(T, N, generator=g))  # prob of chosen action
    logp = torch.log(torch.where(action == 1, p, 1 - p))
    value = 20 + torch.cumsum(torch.randn(T, N, generator=g) * 0.1, dim=0)
    return {"obs": obs, "action": action, "reward": reward, "terminated": terminated,
            "truncated": truncated, "logp": logp, "value": value}


def real_rollout(env: str, T: int, N: int, train_rounds: int) -> dict[str, torch.Tensor]:
    """A rollout collected by the real worker after ``train_rounds`` in-process PPO rounds."""
    from rl_system.config import load_config
    from rl_system.learner import Learner
    from rl_system.worker import RolloutWorker

    cfg = load_config(None, [f"env.name={env}", f"workers.num_envs={N}", f"workers.rollout_len={T}",
                             "compression=none"])
    worker = RolloutWorker(0, cfg)
    learner = Learner(cfg, *worker.specs())
    weights = learner.get_weights()
    for version in range(train_rounds):
        _, payload = worker.sample(weights, version)
        _, weights = learner.update(payload)
    _, payload = worker.sample(weights, train_rounds)
    cols, _ = decode(payload)
    return {k: v for k, v in cols.items() if not k.startswith("episode_")}


def _best(fn, repeat: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def bench(cols: dict[str, torch.Tensor], repeat: int) -> None:
    meta = {"worker": 0, "policy_version": 1}
    groups = [(name, {name: t}) for name, t in cols.items()] + [("ALL columns", cols)]
    for name, group in groups:
        raw = sum(t.numel() * t.element_size() for t in group.values())
        shapes = ", ".join(f"{k}{list(t.shape)} {str(t.dtype)[6:]}" for k, t in group.items())
        print(f"\n== {name}: {shapes if len(group) == 1 else f'{len(group)} columns'}")
        print(f"{'config':<18}{'raw MB':>8}{'ratio':>9}{'comp MB/s':>11}{'decomp MB/s':>13}")
        for label, kw in CONFIGS:
            payload = encode(group, meta, **kw)
            r = max(1, repeat // 5) if kw.get("level", 0) > 0 else repeat  # HC is slow
            te = _best(lambda: encode(group, meta, **kw), r)
            td = _best(lambda: decode(payload), repeat)
            print(f"{label:<18}{raw / 1e6:>8.3f}{raw / len(payload):>9.2f}"
                  f"{raw / te / 1e6:>11.0f}{raw / td / 1e6:>13.0f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--env", default="CartPole")
    ap.add_argument("--T", type=int, default=64)
    ap.add_argument("--N", type=int, default=1024)
    ap.add_argument("--train-rounds", type=int, default=20)
    ap.add_argument("--synthetic", action="store_true", help="use a synthetic CartPole-like rollout")
    args = ap.parse_args()
    torch.set_num_threads(1)
    cols = synthetic_rollout(args.T, args.N) if args.synthetic else real_rollout(args.env, args.T, args.N, args.train_rounds)
    bench(cols, args.repeat)
