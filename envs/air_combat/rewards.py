"""Reward-shaping plug-ins for :class:`rl_system.envs.air_combat.AirCombatVecEnv`.

The env's reward is the terminal ``+1`` / ``-1`` / ``0`` (see :mod:`rl_system.envs.air_combat.env`) plus the sum
of its ``reward_modules``: objects following :class:`RewardModule`
(``compute(obs_before, obs_after, action, done, info) -> [N]``); ``obs_after`` is the pre-reset
observation (``final_obs``). In a config a module is named (:data:`REWARD_MODULES`), optionally
with its constructor arguments:
``pursuit`` (:class:`PursuitShaping`: closing range, nose on the enemy, optionally only until
the first shot), ``missile_evasion`` (:class:`MissileEvasionShaping`: opening the range to
the nearest incoming missile, keeping it on the tail), ``fire_discipline``
(:class:`FireDisciplineShaping`: a cost per missile fired out of range/off the nose, a bonus
per missile fired in range), ``timeout_penalty`` (:class:`TimeoutPenalty`: a cost for running
out the clock).

Kept apart from the simulator because shaping is a training choice, not part of the physics:
modules are added and tuned per experiment, while :mod:`rl_system.envs.air_combat.env` stays the duel itself.
It reads the env's interface -- the observation indices, the range scale and the
``info["outcome"]`` codes -- from :mod:`rl_system.envs.air_combat.spec`, which the env imports too, so
the simulator and its shaping do not import each other.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Protocol, Sequence, runtime_checkable

import torch

from rl_system.envs.air_combat.spec import (
    OBS_BEARING_COS,
    OBS_MISSILE_BEARING_COS,
    OBS_MISSILE_RANGE,
    OBS_MISSILES_LEFT,
    OBS_RANGE,
    OBS_WARNING,
    OUTCOME_TIMEOUT,
    RANGE_SCALE_M,
)
from rl_system.envs.base import Obs

# --------------------------------------------------------------------------- reward modules


@runtime_checkable
class RewardModule(Protocol):
    """Pluggable reward shaping; the env adds ``compute(...)`` of every module to its reward.

    ``obs_before``: red's observation the action was chosen on; ``obs_after``: red's observation
    after the step, before any auto-reset (``final_obs``); ``action``: red's action as passed to
    ``step``; ``done``: bool ``[N]``; ``info``: the step's info dict. Returns float ``[N]``."""

    def compute(self, obs_before: Obs, obs_after: Obs, action: torch.Tensor, done: torch.Tensor,
                info: dict[str, torch.Tensor]) -> torch.Tensor: ...


class PursuitShaping:
    """Example shaping: ``closing_coef * (range_before - range_after) / RANGE_SCALE`` per metre
    closed plus ``pointing_coef * cos(bearing)`` per step (nose on the enemy). Small by default
    so that the terminal ``±1`` dominates over an episode. ``until_first_launch``: only until the
    own first missile is away (so that turning away after the shot is not penalised).
    ``min_range_m``: no reward for closing below this range, nor for pointing there -- with
    ``until_first_launch``, pursuit reward still to be earned is an incentive to hold fire, so
    the floor should sit at the edge of the firing envelope, where shooting should start."""

    def __init__(self, closing_coef: float = 1.0, pointing_coef: float = 1e-4,
                 until_first_launch: bool = False, min_range_m: float = 0.0) -> None:
        if min_range_m < 0:
            raise ValueError(f"pursuit needs min_range_m >= 0, got {min_range_m}")
        self.closing_coef = closing_coef
        self.pointing_coef = pointing_coef
        self.until_first_launch = until_first_launch
        self.min_range = min_range_m / RANGE_SCALE_M

    def compute(self, obs_before: Obs, obs_after: Obs, action: torch.Tensor, done: torch.Tensor,
                info: dict[str, torch.Tensor]) -> torch.Tensor:
        before, after = obs_before["obs"], obs_after["obs"]
        floor = self.min_range
        closing = before[:, OBS_RANGE].clamp(min=floor) - after[:, OBS_RANGE].clamp(min=floor)
        pointing = after[:, OBS_BEARING_COS] * (after[:, OBS_RANGE] > floor)
        reward = self.closing_coef * closing + self.pointing_coef * pointing
        if self.until_first_launch:
            reward = reward * (after[:, OBS_MISSILES_LEFT] > 1.0 - 1e-3)
        return reward


class TimeoutPenalty:
    """Example shaping: ``-penalty`` where the episode ends by the time limit (``info["outcome"]``
    timeout), so that running out the clock is no better than losing."""

    def __init__(self, penalty: float = 1.0) -> None:
        self.penalty = penalty

    def compute(self, obs_before: Obs, obs_after: Obs, action: torch.Tensor, done: torch.Tensor,
                info: dict[str, torch.Tensor]) -> torch.Tensor:
        return (info["outcome"] == OUTCOME_TIMEOUT).float() * -self.penalty


class MissileEvasionShaping:
    """Example shaping for surviving incoming missiles, counted only while an enemy missile is in
    flight: ``coef * (d_after - d_before)``, where ``d`` is the observed range to the nearest enemy
    missile (obs 12, in units of ``RANGE_SCALE_M``), so opening the range to it (dragging it out)
    is rewarded and letting it close penalised; plus ``tail_coef * -cos(its bearing)`` per step
    (obs 14), i.e. a reward for keeping it on the tail."""

    def __init__(self, coef: float = 1.0, tail_coef: float = 0.0) -> None:
        self.coef = coef
        self.tail_coef = tail_coef

    def compute(self, obs_before: Obs, obs_after: Obs, action: torch.Tensor, done: torch.Tensor,
                info: dict[str, torch.Tensor]) -> torch.Tensor:
        before, after = obs_before["obs"], obs_after["obs"]
        both = before[:, OBS_WARNING] * after[:, OBS_WARNING]
        reward = self.coef * both * (after[:, OBS_MISSILE_RANGE] - before[:, OBS_MISSILE_RANGE])
        return reward - self.tail_coef * after[:, OBS_MISSILE_BEARING_COS]


class FireDisciplineShaping:
    """Example shaping against wasting missiles: ``-cost`` for every missile launched (a launch is
    seen as a drop of the own-missiles-left observation, obs 4), and ``+in_range_bonus`` instead
    where the enemy was within ``max_range_m`` and ``max_off_boresight_rad`` of the nose when it
    was launched (and no closer than ``min_range_m``: a window just inside the opponent's own
    firing range rewards shooting first rather than merely shooting). ``first_only``: the bonus only for the first missile of an episode (so that it
    cannot be farmed by emptying the rack; later good launches are then free)."""

    def __init__(self, cost: float = 0.02, in_range_bonus: float = 0.02, max_range_m: float = 25_000.0,
                 max_off_boresight_rad: float = math.radians(30.0), first_only: bool = False,
                 min_range_m: float = 0.0) -> None:
        if not 0.0 <= min_range_m < max_range_m:
            raise ValueError(f"fire_discipline needs 0 <= min_range_m < max_range_m, got {min_range_m}, {max_range_m}")
        self.cost = cost
        self.in_range_bonus = in_range_bonus
        self.max_range = max_range_m / RANGE_SCALE_M
        self.min_range = min_range_m / RANGE_SCALE_M
        self.min_cos = math.cos(max_off_boresight_rad)
        self.first_only = first_only

    def compute(self, obs_before: Obs, obs_after: Obs, action: torch.Tensor, done: torch.Tensor,
                info: dict[str, torch.Tensor]) -> torch.Tensor:
        before, after = obs_before["obs"], obs_after["obs"]
        launched = (before[:, OBS_MISSILES_LEFT] - after[:, OBS_MISSILES_LEFT]).gt(1e-3).float()
        rng = before[:, OBS_RANGE]
        good = (rng < self.max_range) & (rng >= self.min_range) & (before[:, OBS_BEARING_COS] > self.min_cos)
        bonus = torch.where(good, self.in_range_bonus, -self.cost)
        if self.first_only:
            bonus = torch.where(good & (before[:, OBS_MISSILES_LEFT] < 1.0 - 1e-3), 0.0, bonus)
        return launched * bonus


REWARD_MODULES: dict[str, Callable[..., RewardModule]] = {
    "pursuit": PursuitShaping,
    "missile_evasion": MissileEvasionShaping,
    "fire_discipline": FireDisciplineShaping,
    "timeout_penalty": TimeoutPenalty,
}
"""Reward modules selectable by name in a config (``env.kwargs.reward_modules``)."""


def build_reward_modules(specs: Sequence[Any]) -> list[RewardModule]:
    """Reward modules from config-friendly specs: a module object, a name from
    :data:`REWARD_MODULES`, or a mapping ``{"name": NAME, **constructor kwargs}``."""
    modules: list[RewardModule] = []
    for spec in specs:
        if isinstance(spec, str):
            spec = {"name": spec}
        if isinstance(spec, Mapping):
            kwargs = dict(spec)
            name = kwargs.pop("name", None)
            if name not in REWARD_MODULES:
                raise ValueError(f"unknown reward module {name!r}; known: {', '.join(sorted(REWARD_MODULES))}")
            modules.append(REWARD_MODULES[name](**kwargs))
        elif isinstance(spec, RewardModule):
            modules.append(spec)
        else:
            raise TypeError(f"reward module {spec!r}: expected a name, a {{name: ..., **kwargs}} mapping "
                            "or an object with compute(obs_before, obs_after, action, done, info)")
    return modules
