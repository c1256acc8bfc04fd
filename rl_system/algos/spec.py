"""What an algorithm declares about itself: :class:`AlgorithmSpec`, one per algorithm package, and
the capabilities the rest of the code asks about (never the algorithm's name).

A capability is a feature of the system that only some algorithms serve: closed-form gradients,
V-trace targets, exporting one agent's policy. The config's checks, evaluation, export and the
API ask ``spec.has(CAPABILITY)``; a run that asks for a capability its algorithm lacks ends in one
line naming the capability and the algorithms that have it (:func:`rl_system.algos.registry.require`).
Torch-free: the config imports it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Capability:
    """A feature some algorithms serve: its key, how a person names it, and what turns it on."""

    key: str
    title: str
    switch: str = ""

    def __str__(self) -> str:
        return self.title


DISCRETE = Capability("discrete", "discrete actions")
MULTI_DISCRETE = Capability("multi_discrete", "multi-discrete actions with masks")
CONTINUOUS = Capability("continuous", "continuous actions")
SINGLE_AGENT = Capability("single_agent", "single-agent envs")
MULTI_AGENT = Capability("multi_agent", "multi-agent envs")
AGENT_GROUPS = Capability("agent_groups", "agents of different kinds, a policy per agent group", "mappo.groups")
RECURRENT = Capability("recurrent", "a recurrent core (GRU, LSTM)")
MODEL_SECTION = Capability("model_section", "a network from the model: section", "model.network, model.recurrent")
CLOSED_FORM = Capability("closed_form", "closed-form gradients", "learner.gradients: closed_form")
COMPILE = Capability("compile", "a compiled loss", "learner.compile")
VTRACE = Capability("vtrace", "V-trace value targets", "ppo.value_target: vtrace")
PROXIMAL = Capability("proximal", "the decoupled objective for lagged rollouts", "ppo.ratio_anchor: proximal")
LEARNER_GROUP = Capability("learner_group", "a data-parallel learner group", "learner.num_learners")
SELFPLAY = Capability("selfplay", "self-play against earlier snapshots", "selfplay.enabled")
EXPORT = Capability("export", "ONNX and TorchScript export", "rl-system export")
AGENT_EXPORT = Capability("agent_export", "one agent's policy exported alone", "rl-system export --agent")
ACTING_POLICY = Capability("acting_policy", "a policy object that acts on batches", "rl_system.load_policy")
VIDEOS = Capability("videos", "evaluation videos and renders", "rl-system eval --video / --render")
GREEDY_LEVELS = Capability("greedy_levels", "greedy evaluation at one level of the hierarchy", "rl-system eval --deterministic high (or low)")

CAPABILITIES = (DISCRETE, MULTI_DISCRETE, CONTINUOUS, SINGLE_AGENT, MULTI_AGENT, AGENT_GROUPS, RECURRENT,
                MODEL_SECTION, CLOSED_FORM, COMPILE, VTRACE, PROXIMAL, LEARNER_GROUP, SELFPLAY, EXPORT, AGENT_EXPORT,
                ACTING_POLICY, VIDEOS, GREEDY_LEVELS)
"""Every capability, in the order the docs list them."""


@dataclass(frozen=True)
class AlgorithmSpec:
    """One algorithm, as its package declares it (``SPEC`` in ``rl_system/algos/<name>/``).

    ``module`` provides the factories of :class:`~rl_system.algos.protocols.AlgorithmModule`
    (``make_policy``, ``make_sampler``, ``make_trainer``, ``POLICY_SECTION``), imported when first
    used; ``config`` is the class of its config section, which the run config carries under
    ``name``. ``checks(cfg)``: the algorithm's own checks across sections of a run config, each
    raising ``ValueError`` with one line. ``recurrent_key``: where its recurrent core is set, for
    the line that refuses PPO's ``model.recurrent`` elsewhere. ``greedy_levels(cfg)``: whether this
    run's policy has levels to evaluate greedily one at a time."""

    name: str
    title: str
    module: str
    config: type
    summary: str
    capabilities: frozenset[Capability]
    paper: str = ""
    recurrent_key: str | None = None
    checks: Callable[[Any], None] = field(default=lambda cfg: None, compare=False)
    greedy_levels: Callable[[Any], bool] = field(default=lambda cfg: False, compare=False)

    def has(self, capability: Capability) -> bool:
        return capability in self.capabilities
