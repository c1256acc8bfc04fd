"""Evaluation: run a checkpoint's policy without training and report episode statistics.

Runs in-process (no Ray needed): builds the env named in the checkpoint's config and the
algorithm's sampler, collects rollouts of ``num_envs`` copies until ``episodes`` episodes have
finished, and reports mean ± std of the return and length and the rate of every boolean episode
outcome the env reports (``success_rate``, ``win_rate``...); on a multi-agent env also each
agent's own return (``agent_return_mean``, ``agent_return_std``: lists in the env's agent order)
beside the team's (``return_*``: MAPPO's agents' mean, HMASD's team reward). Episodes are
counted in the order they finish; with many envs the first ``episodes`` to finish are slightly
biased to short ones, so by default each env contributes at most ``ceil(episodes / num_envs)``
episodes.
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable

import torch

from rl_system.algos import get_algorithm, load_policy
from rl_system.algos.registry import get_spec, require
from rl_system.algos.spec import GREEDY_LEVELS
from rl_system.checkpoint import keys
from rl_system.config import RunConfig
from rl_system.envs import make_env


@torch.no_grad()
def evaluate(state: dict[str, Any], episodes: int = 100, deterministic: bool | str = False, num_envs: int | None = None,
             seed: int = 12345, device: str = "cpu", max_steps: int = 1_000_000,
             opponent: dict[str, Any] | None = None,
             instrument: Callable[[Any], None] | None = None,
             random_groups: tuple[str, ...] = ()) -> dict[str, Any]:
    """``deterministic``: argmax actions; for HMASD with its hierarchy also ``"high"`` or ``"low"``,
    the argmax at that level only (the other samples). ``opponent``: another checkpoint's state
    whose policy flies the other side (two-player envs with ``set_opponent``, e.g. AirCombat),
    instead of the env's scripted opponent. ``instrument(env)`` is called once the env is built
    and reset, before the first step (e.g. to attach an AirCombat launch log). ``random_groups``:
    agent groups of a grouped MAPPO policy that act uniformly at random (a trained group scored
    against opponents at random, or every group at random for the baseline)."""
    cfg = RunConfig.model_validate(state[keys.CONFIG])
    if isinstance(deterministic, str):
        require(cfg.algo, GREEDY_LEVELS, f"a greedy level ({deterministic!r})")
        if not get_spec(cfg.algo).greedy_levels(cfg):
            raise ValueError(f"a greedy level ({deterministic!r}) needs a policy with levels; this {cfg.algo} policy "
                             f"is flat")
    n = num_envs or min(episodes, 64)
    per_env = math.ceil(episodes / n)
    env, sampler = policy_sampler(state, n, seed, device, opponent)
    try:
        groups = _acting_at_random(getattr(sampler, "policy", None), random_groups)
    except ValueError:
        env.close()
        raise
    try:
        if instrument is not None:
            instrument(env)
        counts = torch.zeros(n, dtype=torch.int64)
        taken: dict[str, list[torch.Tensor]] = {}  # "return", "length", then each outcome key
        finished, steps, t0 = 0, 0, time.perf_counter()
        while finished < episodes and steps < max_steps:
            _, ended = sampler.collect(deterministic=deterministic)
            steps += cfg.workers.rollout_len * n
            keep = _within_quota(ended.env.cpu().long(), counts, per_env)
            finished += int(keep.sum())
            columns = {"return": ended.returns, "length": ended.lengths, **ended.outcomes}
            if ended.agent_returns is not None:
                columns["agent_return"] = ended.agent_returns
            for k, v in columns.items():
                taken.setdefault(k, []).append(v.detach().cpu()[keep])
    finally:
        env.close()
    out = {"env": cfg.env.name, "algo": cfg.algo, "policy_version": int(state[keys.LEARNER][keys.VERSION]),
           "opponent_version": None if opponent is None else int(opponent[keys.LEARNER][keys.VERSION]),
           "episodes": min(finished, episodes), "deterministic": deterministic,
           "env_steps": steps, "wall_s": time.perf_counter() - t0}
    for name, parts in taken.items():
        out.update(_statistic(name, torch.cat(parts)[:episodes]))
    if groups and "agent_return_mean" in out:  # each group's return: its agents' mean
        each = out["agent_return_mean"]
        out["group_return_mean"] = {g.name: sum(each[j] for j in g.agents) / len(g.agents) for g in groups}
        out["groups"] = {g.name: list(g.agents) for g in groups}
        out["random_groups"] = sorted(random_groups)
    for name in ("return", "length"):
        out.setdefault(f"{name}_mean", None)
        out.setdefault(f"{name}_std", None)
    return out


def _acting_at_random(policy: Any, names: tuple[str, ...]) -> tuple[Any, ...]:
    """The policy's agent groups (empty for one network), ``names`` of them set to act at random;
    ``ValueError`` (one line) for a name that is not one of its groups."""
    groups = getattr(policy, "agent_groups", ())
    known = [g.name for g in groups]
    unknown = [name for name in names if name not in known]
    if unknown:
        has = f"its groups: {', '.join(known)}" if known else "its agents are one group (all alike)"
        raise ValueError(f"random group {unknown[0]!r} is not a group of this policy ({has})")
    if groups:
        policy.acting_at_random = frozenset(names)
    return groups


def _statistic(name: str, v: torch.Tensor) -> dict[str, Any]:
    """The result's entries for one column of the taken episodes: mean and std of ``return`` and
    ``length`` ``[E]`` and of each of the env's numeric episode stats, one of each per agent for
    ``agent_return`` ``[E, n]`` (lists, agent order), the rate of a boolean outcome."""
    outcome = v.dtype == torch.bool
    v = v.double()
    if name == "agent_return":
        return {"agent_return_mean": v.mean(0).tolist(), "agent_return_std": v.std(0, unbiased=False).tolist()}
    if not outcome:
        return {f"{name}_mean": float(v.mean()), f"{name}_std": float(v.std(unbiased=False))}
    return {f"{name}_rate": float(v.mean())}  # a boolean outcome


def policy_sampler(state: dict[str, Any], num_envs: int, seed: int, device: str = "cpu",
                   opponent: dict[str, Any] | None = None) -> tuple[Any, Any]:
    """``(env, sampler)``: ``num_envs`` copies of the checkpoint's env and its algorithm's sampler
    running the checkpoint's policy, seeded and reset, so the same state and seed sample the same
    rollouts. The caller closes ``env``."""
    cfg = RunConfig.model_validate(state[keys.CONFIG])
    torch.manual_seed(seed)  # the policy samples from the global generator
    try:
        env = make_env(cfg.env.name, num_envs, device, seed=seed, **cfg.env.test_kwargs())
    except TypeError as err:  # an unknown kwarg (e.g. from `rl-system eval --env`)
        raise ValueError(f"env {cfg.env.name!r}: {err}") from None
    try:
        policy = load_policy(state, env, device)
        if opponent is not None:
            _set_opponent(env, opponent, device)
        sampler = get_algorithm(cfg.algo).make_sampler(env, policy, cfg, torch.device(device))
        sampler.reset(seed)
    except BaseException:
        env.close()
        raise
    return env, sampler


def _within_quota(env_index: torch.Tensor, counts: torch.Tensor, per_env: int) -> torch.Tensor:
    """Which of a rollout's finished episodes (``env_index [E]``, in finishing order) still fit
    their env's quota of ``per_env`` episodes; updates ``counts [num_envs]`` in place."""
    n = counts.numel()
    one_hot = torch.nn.functional.one_hot(env_index, n)                # [E, num_envs]
    rank = (one_hot.cumsum(0) * one_hot).sum(1) - 1                   # earlier episodes of the same env
    keep = counts.index_select(0, env_index) + rank < per_env
    counts += torch.bincount(env_index[keep], minlength=n)
    return keep


def _set_opponent(env, opponent: dict[str, Any], device: str) -> None:
    """Let another checkpoint's policy fly the env's other side (as a self-play snapshot would)."""
    from rl_system.algos.selfplay import SnapshotOpponent

    if not callable(getattr(env, "set_opponent", None)):
        raise ValueError(f"env {type(env).__name__} has no pluggable opponent (set_opponent)")
    other = RunConfig.model_validate(opponent[keys.CONFIG])
    try:
        net = load_policy(opponent, env, device)
    except (RuntimeError, KeyError, ValueError) as err:  # another env or network shape
        raise ValueError(f"the opponent checkpoint ({other.env.name}, {other.algo}) does not fit "
                         f"{type(env).__name__}: {str(err).splitlines()[0]}") from None
    env.set_opponent(SnapshotOpponent(net))
