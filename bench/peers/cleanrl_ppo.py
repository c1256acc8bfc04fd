"""Single-file CleanRL-style PPO peer baseline on Gymnasium CartPole-v1.

Written in the spirit of CleanRL's ``ppo.py`` (same algorithm and default
hyper-parameters for CartPole) but not copied from it.  Differences that
matter for a benchmark:

* Environments come from ``gymnasium.make_vec("CartPole-v1", ...,
  vectorization_mode="vector_entry_point")`` (the numpy-vectorised
  ``CartPoleVectorEnv``) by default; ``vectorization_mode="sync"`` gives a
  ``SyncVectorEnv`` like CleanRL.  Both use Gymnasium 1.x's NEXT_STEP
  autoreset: the step *after* a terminal/truncated step ignores the action,
  returns reward 0 and the first observation of the next episode.  Those
  autoreset steps are masked out of the loss and are *not* counted as env
  steps, and the truncated step's value bootstrap uses the real final
  observation (which, in NEXT_STEP mode, is the observation returned by the
  truncating step itself).
* The 100-episode mean is a true sliding window over the last 100 completed
  episodes and is checked after every vector step (so the reported time is the
  exact moment the target is crossed).

Run: ``python -m bench.peers.cleanrl_ppo --seeds 0 1 2``
"""
from __future__ import annotations

import argparse
import collections
import math
import random
import time
from dataclasses import dataclass, replace
from typing import Dict, Optional

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
from torch.distributions import Categorical

from bench.peers import peer_result

ENV_ID = "CartPole-v1"


@dataclass(frozen=True)
class PPOArgs:
    num_envs: int = 4
    num_steps: int = 128
    learning_rate: float = 2.5e-4
    anneal_lr: bool = True
    total_timesteps: int = 500_000  # only used for the lr-annealing schedule
    gamma: float = 0.99
    gae_lambda: float = 0.95
    num_minibatches: int = 4
    update_epochs: int = 4
    norm_adv: bool = True
    clip_coef: float = 0.2
    clip_vloss: bool = True
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    hidden: int = 64


VARIANTS: Dict[str, PPOArgs] = {
    # CleanRL's ppo.py defaults for CartPole-v1.
    "default": PPOArgs(),
    # More envs (bigger, cheaper-per-step batches), higher lr; otherwise the
    # same algorithm.  Picked from a short sweep for wall time on 2 CPUs.
    "fast": PPOArgs(num_envs=32, num_steps=64, learning_rate=2e-3),
}


def _layer(i: int, o: int, std: float = math.sqrt(2)) -> nn.Linear:
    layer = nn.Linear(i, o)
    nn.init.orthogonal_(layer.weight, std)
    nn.init.constant_(layer.bias, 0.0)
    return layer


class Agent(nn.Module):
    def __init__(self, obs_dim: int, n_actions: int, hidden: int = 64):
        super().__init__()
        self.critic = nn.Sequential(
            _layer(obs_dim, hidden), nn.Tanh(),
            _layer(hidden, hidden), nn.Tanh(),
            _layer(hidden, 1, std=1.0),
        )
        self.actor = nn.Sequential(
            _layer(obs_dim, hidden), nn.Tanh(),
            _layer(hidden, hidden), nn.Tanh(),
            _layer(hidden, n_actions, std=0.01),
        )

    def value(self, x: torch.Tensor) -> torch.Tensor:
        return self.critic(x).squeeze(-1)

    def act(self, x: torch.Tensor, action: Optional[torch.Tensor] = None):
        dist = Categorical(logits=self.actor(x))
        if action is None:
            action = dist.sample()
        return action, dist.log_prob(action), dist.entropy(), self.value(x)


def _make_envs(n: int, seed: int, vectorization_mode: str):
    if vectorization_mode == "vector_entry_point":
        envs = gym.make_vec(ENV_ID, num_envs=n, vectorization_mode="vector_entry_point")
    elif vectorization_mode == "sync":
        envs = gym.vector.SyncVectorEnv([lambda: gym.make(ENV_ID) for _ in range(n)])
    else:
        raise ValueError(vectorization_mode)
    mode = envs.metadata.get("autoreset_mode")
    assert mode in (None, gym.vector.AutoresetMode.NEXT_STEP), mode
    envs.action_space.seed(seed)
    return envs


def run_cleanrl_ppo(
    seed: int,
    time_budget_s: float = 120,
    target: float = 475.0,
    variant: str = "default",
    vectorization_mode: str = "vector_entry_point",
    torch_threads: Optional[int] = 1,
    verbose: bool = False,
    **overrides,
) -> dict:
    """Train until the mean return of the last 100 completed episodes is
    >= ``target`` or ``time_budget_s`` of training wall time has passed.
    ``overrides`` replace fields of the variant's :class:`PPOArgs`."""
    args = replace(VARIANTS[variant], **overrides)
    prev_threads = torch.get_num_threads()
    if torch_threads:
        torch.set_num_threads(torch_threads)
    try:
        return _train(args, seed, time_budget_s, target, variant, vectorization_mode, verbose)
    finally:
        torch.set_num_threads(prev_threads)


def _train(a: PPOArgs, seed, time_budget_s, target, variant, vmode, verbose) -> dict:
    t_build = time.perf_counter()
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)

    N, T = a.num_envs, a.num_steps
    batch = N * T
    num_updates = max(1, a.total_timesteps // batch)

    envs = _make_envs(N, seed, vmode)
    obs_dim = envs.single_observation_space.shape[0]
    agent = Agent(obs_dim, envs.single_action_space.n, a.hidden)
    opt = torch.optim.Adam(agent.parameters(), lr=a.learning_rate, eps=1e-5)

    obs_buf = torch.zeros((T, N, obs_dim))
    act_buf = torch.zeros((T, N), dtype=torch.long)
    logp_buf = torch.zeros((T, N))
    rew_buf = torch.zeros((T, N))
    term_buf = torch.zeros((T, N))
    done_buf = torch.zeros((T, N))
    val_buf = torch.zeros((T, N))
    valid_buf = torch.zeros((T, N), dtype=torch.bool)

    next_obs_np, _ = envs.reset(seed=seed)
    next_obs = torch.as_tensor(next_obs_np)
    # True where the previous step ended an episode -> this step is an
    # autoreset (no-op) step under NEXT_STEP semantics.
    autoreset = np.zeros(N, dtype=bool)
    ep_ret = np.zeros(N, dtype=np.float64)
    window: collections.deque = collections.deque(maxlen=100)
    build_s = time.perf_counter() - t_build

    env_steps = 0  # real transitions (autoreset steps excluded)
    vec_steps = 0  # raw per-env step calls (CleanRL's global_step)
    hit = None
    t0 = time.perf_counter()
    update = 0
    while True:
        update += 1
        if a.anneal_lr:
            frac = max(0.0, 1.0 - (update - 1.0) / num_updates)
            opt.param_groups[0]["lr"] = frac * a.learning_rate

        # ---- rollout --------------------------------------------------------
        for t in range(T):
            obs_buf[t] = next_obs
            with torch.no_grad():
                action, logp, _, value = agent.act(next_obs)
            act_buf[t], logp_buf[t], val_buf[t] = action, logp, value
            valid = ~autoreset
            valid_buf[t] = torch.as_tensor(valid)

            next_obs_np, r, term, trunc, _ = envs.step(action.numpy())
            done = np.logical_or(term, trunc)
            rew_buf[t] = torch.as_tensor(r, dtype=torch.float32)
            term_buf[t] = torch.as_tensor(term, dtype=torch.float32)
            done_buf[t] = torch.as_tensor(done, dtype=torch.float32)
            next_obs = torch.as_tensor(next_obs_np)

            vec_steps += N
            env_steps += int(valid.sum())
            ep_ret += r  # reward is 0 on autoreset steps
            finished = done & valid
            if finished.any():
                window.extend(ep_ret[finished].tolist())
                ep_ret[finished] = 0.0
                if hit is None and len(window) == 100:
                    m = sum(window) / 100.0
                    if m >= target:
                        hit = (env_steps, time.perf_counter() - t0, m)
            autoreset = done

        # ---- GAE ------------------------------------------------------------
        # delta_t = r_t + gamma * V(obs_{t+1}) * (1 - term_t) - V(obs_t); under
        # NEXT_STEP autoreset obs_{t+1} is the real final observation even when
        # step t terminated/truncated, so truncation bootstraps correctly.  The
        # chain is cut at done_t; autoreset steps are garbage and are masked.
        with torch.no_grad():
            last_value = agent.value(next_obs)
            adv = torch.zeros((T, N))
            gae = torch.zeros(N)
            for t in reversed(range(T)):
                nv = last_value if t == T - 1 else val_buf[t + 1]
                delta = rew_buf[t] + a.gamma * nv * (1.0 - term_buf[t]) - val_buf[t]
                gae = delta + a.gamma * a.gae_lambda * (1.0 - done_buf[t]) * gae
                adv[t] = gae
            ret = adv + val_buf

        # ---- PPO update -----------------------------------------------------
        mask = valid_buf.reshape(-1)
        b_obs = obs_buf.reshape(-1, obs_dim)[mask]
        b_act = act_buf.reshape(-1)[mask]
        b_logp = logp_buf.reshape(-1)[mask]
        b_adv = adv.reshape(-1)[mask]
        b_ret = ret.reshape(-1)[mask]
        b_val = val_buf.reshape(-1)[mask]
        n = b_obs.shape[0]
        mbs = max(1, n // a.num_minibatches)
        for _ in range(a.update_epochs):
            perm = torch.randperm(n)
            for start in range(0, n, mbs):
                idx = perm[start:start + mbs]
                if idx.numel() < 2:
                    continue
                _, newlogp, ent, newv = agent.act(b_obs[idx], b_act[idx])
                ratio = (newlogp - b_logp[idx]).exp()
                mb_adv = b_adv[idx]
                if a.norm_adv:
                    mb_adv = (mb_adv - mb_adv.mean()) / (mb_adv.std() + 1e-8)
                pg_loss = torch.max(
                    -mb_adv * ratio,
                    -mb_adv * ratio.clamp(1 - a.clip_coef, 1 + a.clip_coef),
                ).mean()
                if a.clip_vloss:
                    v_unclipped = (newv - b_ret[idx]) ** 2
                    v_clipped = b_val[idx] + (newv - b_val[idx]).clamp(-a.clip_coef, a.clip_coef)
                    v_loss = 0.5 * torch.max(v_unclipped, (v_clipped - b_ret[idx]) ** 2).mean()
                else:
                    v_loss = 0.5 * ((newv - b_ret[idx]) ** 2).mean()
                loss = pg_loss - a.ent_coef * ent.mean() + a.vf_coef * v_loss
                opt.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), a.max_grad_norm)
                opt.step()

        wall = time.perf_counter() - t0
        if verbose:
            m = sum(window) / len(window) if window else float("nan")
            print(f"  upd={update:4d} t={wall:6.1f}s steps={env_steps:7d} mean100={m:6.1f} n={len(window)}",
                  flush=True)
        if hit is not None or wall >= time_budget_s:
            break

    envs.close()
    final = sum(window) / len(window) if window else float("nan")
    row = peer_result("cleanrl-style", seed, hit, env_steps, wall, build_s, final)
    return {**row, "variant": variant, "updates": update, "vec_steps_total": int(vec_steps)}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--variant", default="default", choices=sorted(VARIANTS))
    p.add_argument("--budget", type=float, default=120.0)
    p.add_argument("--target", type=float, default=475.0)
    p.add_argument("--vectorization-mode", default="vector_entry_point",
                   choices=["vector_entry_point", "sync"])
    p.add_argument("-v", "--verbose", action="store_true")
    a = p.parse_args(argv)

    rows = []
    for s in a.seeds:
        r = run_cleanrl_ppo(s, a.budget, a.target, a.variant, a.vectorization_mode,
                            verbose=a.verbose)
        rows.append(r)
        print(r, flush=True)
    print(f"\nCleanRL-style PPO [{a.variant}, {a.vectorization_mode}] target={a.target}")
    print(f"{'seed':>4} {'reached':>7} {'time_s':>7} {'env_steps':>9} {'steps/s':>8} {'final':>6}")
    for r in rows:
        print(f"{r['seed']:>4} {str(r['reached']):>7} {r['train_wall_s']:7.1f} "
              f"{r['env_steps']:9d} {r['steps_per_s']:8.0f} {r['final_return']:6.1f}")


if __name__ == "__main__":
    main()
