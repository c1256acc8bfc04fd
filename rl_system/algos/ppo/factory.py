"""PPO's :class:`~rl_system.algos.protocols.AlgorithmModule` factories: the policy (the built-in
actor-critic or ``model.network``), the worker's sampler, the learner's trainer."""

from __future__ import annotations

import inspect

import torch
from torch import nn

from rl_system.algos.ppo.config import ModelConfig, PPOConfig
from rl_system.algos.ppo.policy import ActorCritic, RecurrentActorCritic
from rl_system.algos.ppo.sampler import PolicySampler
from rl_system.algos.ppo.trainer import PPO
from rl_system.algos.protocols import is_recurrent
from rl_system.collective import SOLO, Collective
from rl_system.config import ConfigError, LearnerConfig
from rl_system.envs import EntryPointError, import_entry_point
from rl_system.envs.base import is_multi_agent
from rl_system.errors import one_line

_METHODS = ("act", "evaluate", "value")
_RECURRENT_METHODS = ("act", "evaluate_sequence", "value", "initial_state")


def network_class(target: str) -> type[nn.Module]:
    """The class ``model.network`` names, checked against
    :class:`~rl_system.algos.protocols.ActorCriticNetwork` (its methods);
    :class:`ConfigError` (one line) where it does not import or does not fit."""
    try:
        cls = import_entry_point(target, "model.network")
    except EntryPointError as err:
        raise ConfigError(str(err)) from None
    if not (inspect.isclass(cls) and issubclass(cls, nn.Module)):
        raise ConfigError(f"model.network: {target!r} must be a torch.nn.Module subclass implementing "
                          f"ActorCriticNetwork, got {cls!r}")
    methods, protocol = ((_RECURRENT_METHODS, "RecurrentActorCriticNetwork") if is_recurrent(cls)
                         else (_METHODS, "ActorCriticNetwork"))
    missing = [m for m in methods if not callable(getattr(cls, m, None))]
    if missing:
        raise ConfigError(f"model.network: {target!r} does not implement {protocol}: no "
                          f"{', '.join(missing)} method (needs {', '.join(methods)})")
    return cls


POLICY_SECTION = "model"
"""PPO's network is built from the ``model:`` section."""


def make_policy(obs_spec, action_spec, model: ModelConfig) -> nn.Module:
    """The built-in :class:`ActorCritic` (:class:`RecurrentActorCritic` with ``model.recurrent``),
    or ``model.network`` built from the specs."""
    if is_multi_agent(action_spec):
        raise ConfigError(f"algo ppo trains single-agent envs; this env has {action_spec} actions (multi-agent): "
                          f"use algo: mappo (MAPPO or IPPO) or algo: hmasd")
    if model.network is None:
        cls = RecurrentActorCritic if model.recurrent != "none" else ActorCritic
        return cls(obs_spec, action_spec, model)
    cls = network_class(model.network)
    try:
        policy = cls(obs_spec, action_spec, model)
    except Exception as err:  # noqa: BLE001 - a user's constructor can fail in any way
        raise ConfigError(f"model.network: {model.network}(obs_spec, action_spec, model_cfg) failed: "
                          f"{one_line(err, with_type=True)}") from None
    return policy


def make_sampler(env, policy: nn.Module, ppo: PPOConfig, rollout_len: int, device: torch.device) -> PolicySampler:
    return PolicySampler(env, policy, rollout_len, device, return_gamma=ppo.gamma if ppo.normalize_reward else None)


def make_trainer(policy: nn.Module, ppo: PPOConfig, learner: LearnerConfig, group: Collective = SOLO) -> PPO:
    return PPO(policy, ppo, compile=learner.compile, gradients=learner.gradients, group=group,
               head_threads=learner.head_threads)
