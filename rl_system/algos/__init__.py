"""Learning algorithms, selected by ``algo:`` in the run config.

Each algorithm is a package (:mod:`.ppo`, :mod:`.mappo`, :mod:`.hmasd`) that fulfils the contracts in
:mod:`.protocols`: a policy module (the weights shipped per version), a worker-side
:class:`~.protocols.Sampler` and a learner-side :class:`~.protocols.Trainer`. The columns they
exchange are declared in :mod:`rl_system.rollout.contract`. Each declares itself in its ``spec``
module, and :mod:`.registry` lists them: their names, sections and capabilities come from there.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rl_system.algos.protocols import AlgorithmModule, Sampler, Trainer

LR, MINIBATCH_STEPS, SKIPPED_MINIBATCHES = "lr", "minibatch_steps", "skipped_minibatches"
"""The metrics every trainer reports beside its own (``train/``): the learning rate of the update,
the minibatch steps taken, and those dropped as not finite (the run loop's guard reads it)."""

__all__ = ["LR", "MINIBATCH_STEPS", "SKIPPED_MINIBATCHES", "Algorithm", "AlgorithmModule", "Sampler",
           "Trainer", "get_algorithm", "load_policy"]

@dataclass(frozen=True)
class Algorithm:
    """An algorithm module by name (see :class:`AlgorithmModule`). Its factories take the run
    config and hand each module factory only its sections: the algorithm's settings (the section
    named like it, ``ppo:`` / ``hmasd:``), the network's (``module.POLICY_SECTION``), the
    rollout length, the learner's."""

    name: str
    module: AlgorithmModule

    def settings(self, cfg):
        """The algorithm's own section of the run config."""
        return getattr(cfg, self.name)

    def make_policy(self, obs_spec, action_spec, cfg):
        return self.module.make_policy(obs_spec, action_spec, getattr(cfg, self.module.POLICY_SECTION))

    def make_sampler(self, env, policy, cfg, device) -> Sampler:
        return self.module.make_sampler(env, policy, self.settings(cfg), cfg.workers.rollout_len, device)

    def make_trainer(self, policy, cfg, group=None) -> Trainer:
        """The learner's trainer, reducing over ``group`` (a learner group's
        :class:`~rl_system.collective.Collective`; None: one learner)."""
        from rl_system import collective

        return self.module.make_trainer(policy, self.settings(cfg), cfg.learner, group or collective.SOLO)


def __getattr__(name: str) -> Any:
    # The protocols import torch; importing the package must not (the config imports each
    # algorithm's settings from here).
    if name in ("AlgorithmModule", "Sampler", "Trainer"):
        from rl_system.algos import protocols

        return getattr(protocols, name)
    raise AttributeError(f"module 'rl_system.algos' has no attribute {name!r}")


def get_algorithm(name: str) -> Algorithm:
    """The registered algorithm ``name`` (:mod:`.registry`), its factories imported."""
    from rl_system.algos.registry import get_spec

    return Algorithm(name, importlib.import_module(get_spec(name).module))


def load_policy(state: dict[str, Any], env: Any, device: str = "cpu") -> Any:
    """A checkpoint's policy network for ``env``'s spaces: built by the checkpoint's algorithm
    from its config, its weights loaded, in eval mode (for eval, rendering, opponents)."""
    from rl_system.config import RunConfig

    cfg = RunConfig.model_validate(state["config"])
    policy = get_algorithm(cfg.algo).make_policy(env.observation_spec, env.action_spec, cfg).to(device)
    try:
        policy.load_state_dict(state["learner"]["model"])
    except RuntimeError as err:  # the env's spaces differ from the ones the policy was trained on
        lines = str(err).splitlines()  # torch: a header line, then one line per mismatched tensor
        detail = lines[1].strip() if len(lines) > 1 else str(err)
        raise ValueError(f"the checkpoint's weights do not fit env {cfg.env.name!r} with kwargs {cfg.env.kwargs}: "
                         f"{detail}") from None
    return policy.eval()
