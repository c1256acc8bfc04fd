"""PPO's registry entry (:mod:`rl_system.algos.registry`). Torch-free."""

from __future__ import annotations

from rl_system.algos import spec as cap
from rl_system.algos.ppo.config import PPOConfig

SPEC = cap.AlgorithmSpec(
    name="ppo",
    title="PPO",
    module="rl_system.algos.ppo",
    config=PPOConfig,
    summary="Proximal policy optimisation with the implementation details of CleanRL's ppo.py: GAE, a clipped "
            "surrogate and value loss, minibatch epochs; V-trace targets and the decoupled objective for lagged "
            "rollouts; a recurrent core; closed-form or compiled gradients.",
    paper="Schulman et al. 2017, Proximal Policy Optimization Algorithms",
    capabilities=frozenset({cap.DISCRETE, cap.MULTI_DISCRETE, cap.CONTINUOUS, cap.SINGLE_AGENT, cap.RECURRENT,
                            cap.MODEL_SECTION, cap.CLOSED_FORM, cap.COMPILE, cap.VTRACE, cap.PROXIMAL,
                            cap.LEARNER_GROUP, cap.SELFPLAY, cap.EXPORT, cap.ACTING_POLICY, cap.VIDEOS}),
    recurrent_key="model.recurrent",
)
