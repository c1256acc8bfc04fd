"""Does a policy's argmax run in circles? Greedy episodes of a run's checkpoint, one env at a time,
counting the episodes whose observation repeats one seen earlier in the same episode.

    python -m bench.greedy_cycles RUN [--episodes 100] [--pick latest] [--seed 777]

Where the env's step has no randomness and an observation is the whole state (Level-Based
Foraging with full sight: its random draws are all in ``reset``), a repeated observation under a
deterministic policy is a cycle that lasts until the time limit: the greedy test of such a policy
then scores far below its sampled play (docs/multi_agent.md, the LBF section). Prints one line:
the greedy mean return and length, and how many episodes repeated an observation.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import torch

Obs = dict[str, torch.Tensor]


def observation_key(obs: Obs) -> bytes:
    """The bytes of one env's observation (every key, in name order): equal iff the observation is."""
    return b"".join(obs[k].detach().cpu().numpy().tobytes() for k in sorted(obs))


def greedy_cycles(act: Callable[[Obs], torch.Tensor], env: Any, episodes: int, seed: int) -> dict[str, float]:
    """Plays ``episodes`` episodes of ``env`` (a one-env ``VecEnv``) with ``act(obs) -> action``;
    returns the mean return (summed over agents) and length, and ``repeated``: the episodes in
    which an observation recurred."""
    if env.num_envs != 1:
        raise ValueError(f"greedy_cycles steps one env at a time, got {env.num_envs}")
    obs = env.reset(seed=seed)
    returns, lengths, repeated = [], [], 0
    ret, length, seen, looped = 0.0, 0, set(), False
    while len(returns) < episodes:
        key = observation_key(obs)
        looped = looped or key in seen
        seen.add(key)
        step = env.step(act(obs))
        ret, length = ret + float(step.reward.sum()), length + 1
        if bool((step.terminated | step.truncated).any()):
            returns.append(ret)
            lengths.append(length)
            repeated += looped
            ret, length, seen, looped = 0.0, 0, set(), False
        obs = step.obs
    return {"episodes": episodes, "return_mean": sum(returns) / episodes, "length_mean": sum(lengths) / episodes,
            "repeated": repeated}


def main(argv: list[str] | None = None) -> dict[str, float]:
    from rl_system.api import load_policy, make_env

    ap = argparse.ArgumentParser(prog="python -m bench.greedy_cycles", description=__doc__.split("\n\n")[0])
    ap.add_argument("run", help="a run directory, its checkpoints directory or one checkpoint file")
    ap.add_argument("--episodes", type=int, default=100, help="greedy episodes to play (default %(default)s)")
    ap.add_argument("--pick", default="latest", help="which checkpoint, as rl-system eval's --pick (default %(default)s)")
    ap.add_argument("--seed", type=int, default=777, help="the env's seed (default %(default)s)")
    args = ap.parse_args(argv)
    if args.episodes < 1:
        ap.error(f"--episodes: expected a positive number, got {args.episodes}")
    try:
        policy = load_policy(args.run, pick=args.pick)
    except (ValueError, FileNotFoundError) as err:
        ap.exit(2, f"greedy_cycles: {err}\n")
    env = make_env(policy.cfg.env.name, 1, seed=args.seed, **policy.cfg.env.test_kwargs())
    try:
        out = greedy_cycles(lambda obs: policy.act(obs, deterministic=True)[0], env, args.episodes, args.seed)
    finally:
        env.close()
    print(f"{policy}: greedy return {out['return_mean']:.3f}, length {out['length_mean']:.1f}; "
          f"{out['repeated']} of {args.episodes} episodes repeated an observation")
    return out


if __name__ == "__main__":
    main()
