"""Conformance check of a :class:`~rl_system.envs.base.VecEnv`, in the spirit of Gymnasium's
``check_env`` and PettingZoo's ``api_test``: ``rl-system check-env NAME``.

:func:`check_env` builds the env by name (:func:`rl_system.envs.make_env`), steps it with random legal
actions and returns one :class:`Finding` per check:

``specs``       the declared specs are well formed and agree (``action_mask`` width)
``reset``       ``reset()`` returns exactly the declared keys, shapes ``[N, *shape]``, dtypes,
                device, finite values within declared bounds
``step``        every ``StepResult`` field likewise (reward float32 ``[N]``, or ``[N, n]`` per agent of
                a multi-agent env, flags bool ``[N]``,
                ``final_obs`` with the observation's keys, ``info`` entries ``[N, ...]``)
``action_mask`` every row leaves each (sub-)action at least one legal choice
``autoreset``   an ended episode's ``final_obs`` differs from the ``obs`` returned with it
                (same-step auto-reset, Gymnasium's ``SAME_STEP``); truncations carry ``final_obs``
``determinism`` two copies with the same seed and the same actions give the same trajectories
``state_dict``  where offered, a copy loaded with ``state_dict()`` continues identically
``bad_action``  an action of the wrong shape is refused with an exception, not stepped
``speed``       env steps per second at ``N`` envs (random actions; information only)

Each finding is ``PASS``, ``FAIL`` (a violation), ``SKIP`` (not applicable or not exercised) or
``INFO`` (a measurement).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable

import torch

from rl_system.envs import make_env
from rl_system.envs.base import (
    ACTION_MASK,
    AgentMultiDiscrete,
    MultiDiscrete,
    StepResult,
    VecEnv,
    is_multi_agent,
    sample_actions,
)

Obs = dict[str, torch.Tensor]


PASS, FAIL, SKIP, INFO = "PASS", "FAIL", "SKIP", "INFO"


@dataclass(frozen=True)
class Finding:
    check: str
    status: str  # PASS, FAIL, SKIP or INFO
    detail: str

    @property
    def failed(self) -> bool:
        return self.status == FAIL

    def line(self) -> str:
        return f"{self.status} {self.check}: {self.detail}"


class Violation(Exception):
    """One conformance violation, phrased as a line."""


# -- random legal actions --------------------------------------------------------------------


def random_actions(env: VecEnv, obs: Obs, generator: torch.Generator) -> torch.Tensor:
    """A legal random action for every env of the batch (masks respected), on CPU then moved to
    ``env.device``: ``[N, *action_spec.shape]``."""
    mask = obs.get(ACTION_MASK)
    mask = mask.detach().to("cpu") if mask is not None else None
    return sample_actions(env.action_spec, env.num_envs, mask, generator).to(env.device)


# -- tensor checks ----------------------------------------------------------------------------


def _check_tensor(where: str, t: Any, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device,
                  low: float | None = None, high: float | None = None) -> None:
    if not isinstance(t, torch.Tensor):
        raise Violation(f"{where} must be a torch.Tensor, got {type(t).__name__}")
    if tuple(t.shape) != shape:
        raise Violation(f"{where} has shape {tuple(t.shape)}, declared {shape}")
    if t.dtype != dtype:
        raise Violation(f"{where} has dtype {t.dtype}, declared {dtype}")
    if t.device != device:
        raise Violation(f"{where} is on {t.device}, the env is on {device}")
    if t.is_floating_point():
        if not bool(torch.isfinite(t).all()):
            raise Violation(f"{where} holds NaN or Inf")
        if low is not None and bool((t < low).any()):
            raise Violation(f"{where} has values below the declared low {low} (min {t.min().item():.4g})")
        if high is not None and bool((t > high).any()):
            raise Violation(f"{where} has values above the declared high {high} (max {t.max().item():.4g})")


def _check_obs(where: str, obs: Any, env: VecEnv) -> None:
    if not isinstance(obs, dict):
        raise Violation(f"{where} must be a dict of tensors, got {type(obs).__name__}")
    if set(obs) != set(env.observation_spec):
        raise Violation(f"{where} has keys {sorted(obs)}, declared {sorted(env.observation_spec)}")
    for key, spec in env.observation_spec.items():
        _check_tensor(f"{where}[{key!r}]", obs[key], (env.num_envs, *spec.shape), spec.dtype, env.device,
                      spec.low, spec.high)


def _check_step(result: Any, env: VecEnv) -> None:
    if not isinstance(result, StepResult):
        raise Violation(f"step() must return rl_system.envs.base.StepResult, got {type(result).__name__}")
    n, dev = env.num_envs, env.device
    _check_obs("step().obs", result.obs, env)
    _check_obs("step().final_obs", result.final_obs, env)
    reward_shape = (n,)
    if is_multi_agent(env.action_spec) and getattr(result.reward, "dim", lambda: 1)() == 2:
        reward_shape = (n, env.action_spec.num_agents)  # per-agent rewards
    _check_tensor("step().reward", result.reward, reward_shape, torch.float32, dev)
    _check_tensor("step().terminated", result.terminated, (n,), torch.bool, dev)
    _check_tensor("step().truncated", result.truncated, (n,), torch.bool, dev)
    if not isinstance(result.info, dict):
        raise Violation(f"step().info must be a dict of tensors, got {type(result.info).__name__}")
    for key, value in result.info.items():
        if not isinstance(value, torch.Tensor) or value.shape[:1] != (n,) or value.device != dev:
            got = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
            raise Violation(f"step().info[{key!r}] must be a tensor [N={n}, ...] on {dev}, got {got}")


def _mask_problem(where: str, obs: Obs, env: VecEnv) -> str | None:
    """Where a mask row leaves a (sub-)action no legal choice: a line saying so, else None."""
    mask = obs.get(ACTION_MASK)
    if mask is None:
        return None
    spec = env.action_spec
    widths = spec.nvec if isinstance(spec, (MultiDiscrete, AgentMultiDiscrete)) else (spec.n,)
    rows = mask.reshape(-1, sum(widths))
    start = 0
    for k, width in enumerate(widths):
        empty = ~rows[:, start:start + width].any(dim=1)
        if bool(empty.any()):
            sub = f" sub-action {k}" if len(widths) > 1 else ""
            return f"{where}[{ACTION_MASK!r}] leaves{sub} no legal action in {int(empty.sum())} row(s)"
        start += width
    return None


# -- the checks -------------------------------------------------------------------------------


def _rollout(env: VecEnv, steps: int, seed: int,
             on_step: Callable[[int, Obs, StepResult], None] | None = None) -> list[StepResult]:
    """Reset with ``seed``, then step ``steps`` times with random legal actions; ``on_step(t,
    obs, result)`` sees the observation each action was taken on and what the step returned."""
    generator = torch.Generator().manual_seed(seed)
    obs = env.reset(seed=seed)
    results = []
    for t in range(steps):
        result = env.step(random_actions(env, obs, generator))
        if on_step is not None:
            on_step(t, obs, result)
        results.append(_snapshot(result))
        obs = result.obs
    return results


def _snapshot(result: StepResult) -> StepResult:
    """A copy of ``result`` (an env may reuse its tensors after the next step)."""
    return StepResult(*(_clone(part) for part in result))


def _clone(tree: Any) -> Any:
    """A deep copy of the tensors in ``tree`` (dicts, lists and tuples of them)."""
    if isinstance(tree, torch.Tensor):
        return tree.clone()
    if isinstance(tree, dict):
        return {k: _clone(v) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(_clone(v) for v in tree)
    return tree


def _first_difference(a: list[StepResult], b: list[StepResult]) -> str | None:
    for t, (x, y) in enumerate(zip(a, b)):
        for field in ("reward", "terminated", "truncated"):
            if not torch.equal(getattr(x, field), getattr(y, field)):
                return f"step {t}: {field}"
        for key in x.obs:
            if not torch.equal(x.obs[key], y.obs[key]):
                return f"step {t}: obs[{key!r}]"
    return None


class _Checker:
    def __init__(self, build: Callable[[int], VecEnv], num_envs: int, steps: int, seed: int):
        self.build, self.num_envs, self.steps, self.seed = build, num_envs, steps, seed
        self.findings: list[Finding] = []

    def record(self, check: str, fn: Callable[[], str | tuple[str, str]]) -> None:
        try:
            out = fn()
            status, detail = (PASS, out) if isinstance(out, str) else out
        except Violation as v:
            status, detail = FAIL, str(v)
        except Exception as err:  # noqa: BLE001 - an env under test can fail in any way; report it
            status, detail = FAIL, f"raised {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
        self.findings.append(Finding(check, status, detail))

    def run(self, env: VecEnv) -> list[Finding]:
        self.record("specs", lambda: self.specs(env))
        if is_multi_agent(env.action_spec) and env.action_spec.agents:
            self.record("agents", lambda: self.agents(env))
        self.record("reset", lambda: self.reset(env))
        self.stats: dict[str, int] | None = None
        self.mask_problems: list[str] = []
        self.record("step", lambda: self.step(env))
        if self.stats is not None:  # the step check ran to the end
            self.record("action_mask", lambda: self._mask_verdict(env))
            self.record("autoreset", lambda: self._autoreset_verdict(self.stats))
        self.record("determinism", self.determinism)
        self.record("state_dict", self.state_dict)
        self.record("bad_action", self.bad_action)
        self.record("speed", lambda: self.speed(env))
        return self.findings

    def specs(self, env: VecEnv) -> str:
        spec = env.action_spec
        keys = ", ".join(f"{k} {tuple(s.shape)} {str(s.dtype).removeprefix('torch.')}"
                         for k, s in env.observation_spec.items())
        return f"N={env.num_envs} on {env.device}; observations {keys}; action {spec}"

    def agents(self, env: VecEnv) -> tuple[str, str]:
        """The agents' own spaces, where they differ: what MAPPO groups them by."""
        return INFO, "; ".join(f"{a.name} ({a})" for a in env.action_spec.agents)

    def reset(self, env: VecEnv) -> str:
        obs = env.reset(seed=self.seed)
        _check_obs("reset()", obs, env)
        return f"{len(obs)} observation entries as declared"

    def step(self, env: VecEnv) -> str:
        stats = {"ended": 0, "truncated": 0, "same": 0, "steps": 0}

        def on_step(t: int, obs: Obs, result: StepResult) -> None:
            _check_step(result, env)
            # The observation acted on: reset()'s at t = 0, then each step's (the last one's
            # goes unchecked, as it is never acted on).
            where = "reset() obs" if t == 0 else f"step {t - 1} obs"
            problem = None if self.mask_problems else _mask_problem(where, obs, env)
            if problem:
                self.mask_problems.append(problem)
            done = result.terminated | result.truncated
            stats["steps"] += 1
            if bool(done.any()):
                stats["ended"] += int(done.sum())
                stats["truncated"] += int((result.truncated & ~result.terminated).sum())
                same = torch.ones_like(done)
                for key in result.obs:
                    same &= (result.obs[key] == result.final_obs[key]).reshape(env.num_envs, -1).all(dim=1)
                stats["same"] += int((same & done).sum())

        _rollout(env, self.steps, self.seed, on_step)
        self.stats = stats
        return f"{stats['steps']} steps of {env.num_envs} envs: shapes, dtypes, device and values as declared"

    def _mask_verdict(self, env: VecEnv) -> tuple[str, str]:
        if ACTION_MASK not in env.observation_spec:
            return SKIP, "the env declares no action mask"
        if self.mask_problems:
            return FAIL, self.mask_problems[0]
        return PASS, "every row left each (sub-)action a legal choice"

    def _autoreset_verdict(self, stats: dict[str, int]) -> tuple[str, str]:
        ended = stats["ended"]
        if ended == 0:
            return SKIP, f"no episode ended in {self.steps} steps; auto-reset not exercised (raise --steps)"
        if stats["same"] == ended:
            return FAIL, (f"on all {ended} ended episodes the returned obs equals final_obs: the env does not "
                           "reset in the same step, or final_obs is not the observation the episode ended on")
        return PASS, (f"{ended} episodes ended ({stats['truncated']} truncated), reset in the same step with "
                      "final_obs given")

    def determinism(self) -> str:
        a, b = self.build(self.seed), self.build(self.seed)
        try:
            first = _rollout(a, self.steps, self.seed)
            second = _rollout(b, self.steps, self.seed)
        finally:
            a.close()
            b.close()
        where = _first_difference(first, second)
        if where is not None:
            raise Violation(f"same seed and actions, different trajectories ({where})")
        return f"same seed and actions give identical trajectories over {self.steps} steps"

    def state_dict(self) -> tuple[str, str]:
        half = max(self.steps // 2, 1)
        a, b = self.build(self.seed), self.build(self.seed + 1)
        try:
            generator = torch.Generator().manual_seed(self.seed)
            obs = a.reset(seed=self.seed)
            for _ in range(half):
                obs = a.step(random_actions(a, obs, generator)).obs
            try:
                state = _clone(a.state_dict())
            except NotImplementedError:
                return SKIP, "not offered (a resumed run starts its episodes afresh)"
            b.reset(seed=self.seed + 1)
            b.load_state_dict(state)
            first, actions = [], []
            for _ in range(half):
                actions.append(random_actions(a, obs, generator))
                result = a.step(actions[-1])
                first.append(_snapshot(result))
                obs = result.obs
            second = [_snapshot(b.step(action)) for action in actions]
        finally:
            a.close()
            b.close()
        where = _first_difference(first, second)
        if where is not None:
            return FAIL, f"a copy loaded with state_dict() diverges ({where})"
        return PASS, f"a copy loaded with state_dict() continues identically for {half} steps"

    def bad_action(self) -> tuple[str, str]:
        env = self.build(self.seed)
        try:
            env.reset(seed=self.seed)
            bad = torch.zeros((env.num_envs + 1, *env.action_spec.shape), dtype=env.action_spec.dtype,
                              device=env.device)
            try:
                env.step(bad)
            except Exception as err:  # noqa: BLE001 - any exception is a refusal
                return PASS, f"an action of shape {tuple(bad.shape)} is refused ({type(err).__name__})"
        finally:
            env.close()
        return FAIL, f"an action of shape {tuple(bad.shape)} (N={env.num_envs}) was stepped without an error"

    def speed(self, env: VecEnv) -> tuple[str, str]:
        generator = torch.Generator().manual_seed(self.seed)
        obs = env.reset(seed=self.seed)
        n = max(self.steps, 10)
        start = time.perf_counter()
        for _ in range(n):
            obs = env.step(random_actions(env, obs, generator)).obs
        elapsed = time.perf_counter() - start
        rate = n * env.num_envs / elapsed if elapsed > 0 else math.inf
        return INFO, f"{rate:,.0f} env steps/s at N={env.num_envs} ({n} steps, random actions included)"


def check_env(name: str, num_envs: int = 8, kwargs: dict[str, Any] | None = None, steps: int = 200,
              seed: int = 0, device: str = "cpu") -> list[Finding]:
    """Run every check on env ``name`` (see the module docstring). Building the env by name may
    raise (``EntryPointError`` for a name that does not resolve); everything after that is a
    :class:`Finding`."""
    kwargs = kwargs or {}

    def build(env_seed: int) -> VecEnv:
        return make_env(name, num_envs, device, seed=env_seed, **kwargs)

    env = build(seed)
    try:
        return _Checker(build, num_envs, steps, seed).run(env)
    finally:
        env.close()
