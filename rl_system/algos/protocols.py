"""The contracts an algorithm fulfils. Workers, the learner, eval and the checkpointer use only
these; PPO (:mod:`rl_system.algos.ppo`) and HMASD (:mod:`rl_system.algos.hmasd`) implement them.

An algorithm has two halves that meet only through the rollout columns
(:mod:`rl_system.rollout.contract`) and the weights:

* worker side, a :class:`Sampler` steps the env batch with a copy of the policy and fills one
  rollout's columns;
* learner side, a :class:`Trainer` runs one update on a round's batch.

The policy is an ``nn.Module`` holding every network (and normaliser buffer); its
``state_dict()`` is what the workers receive as "the weights" of a policy version.
An algorithm module (:class:`AlgorithmModule`) builds all three from the env's specs and its
sections of the run config.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import torch
from torch import nn

from rl_system.collective import Collective
from rl_system.config import LearnerConfig
from rl_system.envs.base import ActionSpec, TensorSpec, VecEnv
from rl_system.rollout.contract import Columns, Episodes


@runtime_checkable
class Sampler(Protocol):
    """Worker side: steps ``env`` (N envs) with ``policy`` for ``T`` steps per call."""

    env: VecEnv
    policy: nn.Module

    def reset(self, seed: int | None = None) -> None:
        """Reset every env and the sampler's per-env state (episode counters, hidden states)."""

    def collect(self, deterministic: bool | str = False) -> tuple[Columns, Episodes]:
        """One rollout: its columns (layouts in :mod:`rl_system.rollout.contract`) and the episodes that
        ended in it. ``deterministic`` takes the argmax action (HMASD: ``"high"``/``"low"``
        for one level only)."""

    def state_dict(self) -> dict[str, Any]:
        """What a bit-exact resume needs besides the env and RNG (current obs, episode
        counters, recurrent state)."""

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


@runtime_checkable
class Trainer(Protocol):
    """Learner side: updates the policy in place (the built-in trainers on
    :class:`rl_system.algos.update.Trainer`, whose update core owns the optimiser)."""

    skipped_updates: int
    """Minibatch steps dropped so far for a non-finite loss or gradient (weights untouched)."""
    lr_scale: float
    """Multiplies the configured learning rate (1.0; a rollback on collapse lowers it)."""

    def update(self, batch: Columns, progress: float) -> dict[str, float]:
        """One update on a round's batch (rollouts joined by :func:`rl_system.rollout.contract.concat`);
        ``progress`` in [0, 1] is the share of the step budget used (learning-rate annealing).
        Returns scalar metrics; ``skipped_minibatches`` among them."""

    def state_dict(self) -> dict[str, Any]:
        """Optimiser state: what a checkpoint needs besides the policy weights."""

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


@runtime_checkable
class ActorCriticNetwork(Protocol):
    """PPO's policy network: the built-in :class:`~rl_system.algos.ppo.policy.ActorCritic`
    implements it, and so does a user's own class named by ``model.network``.

    The class is an ``nn.Module`` built as ``Class(obs_spec, action_spec, model_cfg)`` from the
    env's specs (:mod:`rl_system.envs.base`) and the run's ``model:`` section
    (:class:`~rl_system.config.ModelConfig`; ``model_cfg.kwargs`` is free for the class). Its
    ``state_dict()`` is what workers receive per policy version, so everything that acting
    depends on (normaliser statistics included) must be a parameter or a buffer.

    ``obs`` is the env's observation dict, each entry ``[B, *spec.shape]`` (an ``action_mask``
    entry included where the env has one: a policy must give masked actions probability 0).
    Actions are ``[B]`` int64 (Discrete), ``[B, K]`` int64 (MultiDiscrete) or ``[B, *shape]``
    float32 (Box; the env clips to its bounds, ``logp`` is of the unclipped sample).

    Optional: ``observe(obs, group)``, called by the learner after each update with the round's
    observations (``[B, ...]``), to update running statistics such as an observation normaliser;
    ``group`` (:class:`~rl_system.collective.Collective`) is the learner group, over which the
    statistics are made global (``group.moments(x)``). An ``observe(obs)`` without it keeps each
    learner's own statistics.
    """

    def act(self, obs: dict[str, torch.Tensor], deterministic: bool = False
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(action, logp[B], value[B])``, sampled (or the mode when ``deterministic``), no grad."""

    def evaluate(self, obs: dict[str, torch.Tensor], action: torch.Tensor
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(logp[B], entropy[B], value[B])`` of ``action``, differentiable."""

    def value(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        """``value[B]`` (used with ``final_obs`` to bootstrap truncated episodes)."""


@runtime_checkable
class RecurrentActorCriticNetwork(Protocol):
    """PPO's recurrent policy network (``model.recurrent``): the built-in
    :class:`~rl_system.algos.ppo.policy.RecurrentActorCritic` implements it; a user's class named
    by ``model.network`` does too where it has an ``initial_state`` method.

    An env's recurrent state is one tensor row ``[S]`` (``state_size``). The worker keeps a
    ``[N, S]`` state for its N envs, zeroes an env's row when its episode ends, ships the state
    it began the rollout with (column ``init_state``) and saves it in checkpoints; the learner
    replays the rollout from it with :meth:`evaluate_sequence`.
    """

    state_size: int

    def initial_state(self, batch: int) -> torch.Tensor:
        """Zeros ``[batch, S]`` on the policy's device."""

    def act(self, obs: dict[str, torch.Tensor], state: torch.Tensor, deterministic: bool = False
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(action, logp[B], value[B], new_state[B, S])``, no grad."""

    def value(self, obs: dict[str, torch.Tensor], state: torch.Tensor) -> torch.Tensor:
        """``value[B]`` of ``obs`` seen with ``state`` (bootstraps, state not advanced)."""

    def evaluate_sequence(self, obs: dict[str, torch.Tensor], action: torch.Tensor, state0: torch.Tensor,
                          reset: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(logp, entropy, value)`` ``[T, B]`` each of a replay of ``obs[T, B, ...]`` from
        ``state0[B, S]``, the state zeroed before step ``t`` where ``reset[t]``; differentiable."""


def is_recurrent(policy: nn.Module | type) -> bool:
    """Whether ``policy`` (an instance or its class) carries a recurrent state
    (:class:`RecurrentActorCriticNetwork`)."""
    return callable(getattr(policy, "initial_state", None))


class AlgorithmModule(Protocol):
    """What ``algo: <name>`` names: a module with these three factories, each given only its
    sections of the run config (:class:`rl_system.algos.Algorithm` picks them): ``settings`` is the
    section named like the algorithm (``ppo:``, ``hmasd:``), the policy's is ``POLICY_SECTION``."""

    POLICY_SECTION: str
    """The run config's section the policy is built from (``"model"`` for PPO's network)."""

    def make_policy(self, obs_spec: dict[str, TensorSpec], action_spec: ActionSpec, section: Any) -> nn.Module: ...

    def make_sampler(self, env: VecEnv, policy: nn.Module, settings: Any, rollout_len: int,
                     device: torch.device) -> Sampler: ...

    def make_trainer(self, policy: nn.Module, settings: Any, learner: LearnerConfig, group: Collective) -> Trainer: ...
