"""A2C's registry entry (:mod:`rl_system.algos.registry`). Torch-free."""

from __future__ import annotations

from rl_system.algos import spec as cap
from rl_system.algos.a2c.config import A2CConfig

SPEC = cap.AlgorithmSpec(
    name="a2c",
    title="A2C",
    module="rl_system.algos.a2c",
    config=A2CConfig,
    summary="Synchronous advantage actor-critic as Stable-Baselines3 ships it: one gradient step on each round's "
            "whole batch, n-step returns, RMSprop; PPO's actor-critic network and sampler.",
    paper="Mnih et al. 2016, Asynchronous Methods for Deep Reinforcement Learning",
    capabilities=frozenset({cap.DISCRETE, cap.MULTI_DISCRETE, cap.CONTINUOUS, cap.SINGLE_AGENT, cap.MODEL_SECTION,
                            cap.LEARNER_GROUP, cap.EXPORT, cap.ACTING_POLICY, cap.VIDEOS}),
)
