"""The rollout contract: what a sampler fills, a worker ships, the driver gates on, the learner
trains on and the archive stores. Every hop reads column names and meta fields from here.

A rollout travels as two objects from :meth:`RolloutWorker.sample`:

* a :class:`RolloutMeta` (small; the driver gates on its ``version`` and keeps the episode
  statistics for the return window without ever opening the payload), and
* the payload: the rollout's columns encoded by :mod:`rl_system.rollout.codec`, whose JSON header is
  :meth:`RolloutMeta.header` -- the meta without the episode statistics, so the learner re-checks
  the version from checksummed bytes and the archive records which worker and version made it.

Episode statistics travel once, in the meta; they are not columns.

Columns are ``{name: Tensor}``; a name's prefix says its layout (:func:`layout`):

=====================  ===================  ==================================================
name                   layout               shape
=====================  ===================  ==================================================
``obs.<key>``          :attr:`Layout.STEP`  ``[T, N, *obs_spec[key].shape]``
``action``, ``logp``,  :attr:`Layout.STEP`  ``[T, N, ...]`` time-major (any name without one
``reward``, ...                             of the prefixes below)
``last_<name>``        :attr:`Layout.ENV`   ``[N, ...]``: after the rollout's last step
``init_<name>``        :attr:`Layout.ENV`   ``[N, ...]``: before the rollout's first step
``final_<name>``       :attr:`Layout.ENV`   ``[E, ...]``: one row per episode that ended in the
                                            rollout, env-major (env, then time) order
=====================  ===================  ==================================================

``T`` is ``rollout_len``, ``N`` the worker's env count. The learner joins a round's rollouts
along the env axis (:func:`concat`): dim 1 for step columns, dim 0 for the others.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import torch

Columns = dict[str, torch.Tensor]

OBS = "obs."
"""Prefix of observation columns: ``obs.<key>`` holds ``obs[key]``."""
LAST, INIT, FINAL = "last_", "init_", "final_"
_ENV_MAJOR = (LAST, INIT, FINAL)

# The step columns every algorithm's rollout holds (an algorithm's own live in its package,
# e.g. rl_system.algos.hmasd.columns); each name is written here once.
ACTION, LOGP, VALUE, REWARD = "action", "logp", "value", "reward"
"""The action taken, its log-probability under the acting policy, the critic's value, the reward."""
TERMINATED, TRUNCATED = "terminated", "truncated"
"""Bool ``[T, N]``: the episode ended on this step (a terminal state / a time limit or similar)."""
TRUNC_VALUE = "trunc_value"
"""``V(final obs)`` where the episode was truncated on this step (0 elsewhere): its bootstrap."""
DISC_RETURN = "disc_return"
"""The running discounted return (reward scaling's statistics, ``ppo.normalize_reward``)."""


class Layout(Enum):
    STEP = "step"  # [T, N, ...]
    ENV = "env"    # [N, ...] (last_, init_) or [E, ...] (final_)


def layout(name: str) -> Layout:
    """The layout of column ``name`` (see the module docstring)."""
    return Layout.ENV if name.startswith(_ENV_MAJOR) else Layout.STEP


def obs_column(key: str) -> str:
    """Column name of observation key ``key`` (``"lidar"`` -> ``"obs.lidar"``)."""
    return OBS + key


def last_column(name: str) -> str:
    """The ``[N, ...]`` column of ``name`` after the rollout's last step (``"value"`` -> ``"last_value"``)."""
    return LAST + name


def init_column(name: str) -> str:
    """The ``[N, ...]`` column of ``name`` before the rollout's first step."""
    return INIT + name


def final_column(name: str) -> str:
    """The ``[E, ...]`` column of ``name`` on the step each episode ended (one row per episode)."""
    return FINAL + name


def observations(columns: Columns) -> Columns:
    """The observation columns as an observation dict: ``{"lidar": cols["obs.lidar"], ...}``."""
    return {name.removeprefix(OBS): v for name, v in columns.items() if name.startswith(OBS)}


LAST_VALUE = LAST + VALUE
"""``[N, ...]``: the critic's value after the rollout's last step (GAE's bootstrap)."""
INIT_STATE = INIT + "state"
"""``[N, S]``: a recurrent policy's state before the rollout's first step."""

# What an algorithm's preparation adds for its epochs (its ``prepare``), named once for all of them.
# The rollout's own LOGP and VALUE are the old log-probabilities and values a clipped loss compares with.
ADVANTAGE, RETURN, OLD_VALUE = "advantage", "ret", "old_value"
"""Prepared columns: the advantages, the value targets, and old values in the critic's (normalised)
units where they differ from the rollout's ``value``."""


def env_steps_of(columns: Columns) -> int:
    """The env steps a rollout holds, ``T * N`` (its ``terminated`` column's shape): one per env
    and step whatever the env's agents (a multi-agent reward is ``[T, N, n]``: that many agent steps)."""
    T, N = columns[TERMINATED].shape[:2]
    return T * N


def concat(rollouts: list[Columns]) -> Columns:
    """Join rollouts along the env axis: step columns ``[T, N_i, ...]`` -> ``[T, sum N_i, ...]``,
    env-major columns ``[N_i, ...]`` (or ``[E_i, ...]``) along dim 0."""
    if len(rollouts) == 1:
        return dict(rollouts[0])
    return {k: torch.cat([r[k] for r in rollouts], dim=1 if layout(k) is Layout.STEP else 0)
            for k in rollouts[0]}


@dataclass
class Episodes:
    """The episodes that ended in one rollout, in the order they ended (``[E]`` each).

    ``outcomes`` holds every boolean ``info`` entry the env reports per env (``success``,
    ``win``, ...) and the numeric ones it names in ``episode_stats`` (float32, ``soups_served``),
    read on the step the episode ended. ``agent_returns`` (multi-agent samplers
    only) holds each agent's own return, the sum of its reward (the team's where the env gives one
    team reward ``[N]``); ``returns`` is then the figure the algorithm reports for the team."""

    returns: torch.Tensor  # float32 [E]
    lengths: torch.Tensor  # int32 [E]
    env: torch.Tensor      # int64 [E]: index of the env that finished it
    outcomes: dict[str, torch.Tensor] = field(default_factory=dict)  # bool or float32 [E] each
    agent_returns: torch.Tensor | None = None  # float32 [E, n]

    def __len__(self) -> int:
        return int(self.returns.numel())


@dataclass
class RolloutMeta:
    """What the driver learns of a rollout without opening its payload.

    The ``episode_*`` lists hold the last ``return_window`` episodes that ended in the rollout (the
    driver's window never needs more); ``num_episodes`` counts all of them."""

    version: int            # policy version that acted
    worker_id: int
    env_steps: int          # T * N
    num_episodes: int
    sample_s: float
    fresh_process: bool     # the worker's first rollout since its process (re)started
    opponent_version: int = -1  # self-play: the snapshot flying the other side; -1 = scripted
    episode_returns: list[float] = field(default_factory=list)
    episode_lengths: list[int] = field(default_factory=list)
    episode_outcomes: dict[str, list[bool] | list[float]] = field(default_factory=dict)
    raw_bytes: int = 0      # the columns' bytes before encoding
    payload_bytes: int = 0  # the encoded payload's bytes
    encode_s: float = 0.0
    cpu_s: float = 0.0      # CPU seconds of the worker's process for sample + encode (all its threads)

    HEADER = ("version", "worker_id", "env_steps", "num_episodes", "sample_s", "fresh_process",
              "opponent_version")
    """The fields the payload's codec header carries."""

    @classmethod
    def of(cls, episodes: Episodes, window: int, **fields: Any) -> RolloutMeta:
        """A meta holding the last ``window`` of ``episodes`` (returns, lengths, outcomes)."""
        return cls(num_episodes=len(episodes), episode_returns=episodes.returns[-window:].tolist(),
                   episode_lengths=episodes.lengths[-window:].tolist(),
                   episode_outcomes={k: v[-window:].tolist() for k, v in episodes.outcomes.items()}, **fields)

    def header(self) -> dict[str, Any]:
        """The payload's codec header: identity and provenance, no episode statistics."""
        return {k: getattr(self, k) for k in self.HEADER}  # all scalars: no deep copy of the episode lists


def header_version(header: dict[str, Any]) -> int:
    """The policy version recorded in a decoded payload's header."""
    try:
        return int(header["version"])
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"rollout header has no policy version (keys: {', '.join(map(str, header))})") from None
