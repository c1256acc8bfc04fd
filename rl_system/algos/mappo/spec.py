"""Multi-agent PPO's registry entry (:mod:`rl_system.algos.registry`). Torch-free."""

from __future__ import annotations

from typing import Any

from rl_system.algos import spec as cap
from rl_system.algos.mappo.config import MAPPOConfig


def checks(cfg: Any) -> None:
    """Across the run config's sections: what MAPPO's settings cannot be combined with."""
    m = cfg.mappo
    if m.recurrent != "none" and cfg.selfplay.enabled:
        raise ValueError("mappo.recurrent with selfplay: a recurrent opponent snapshot is not supported")
    if m.central_value == "joint" and m.critic == "local":
        raise ValueError("mappo.central_value: joint runs a central critic once per env step on the state; "
                         "mappo.critic is local (each agent's value from its own observation): set critic: "
                         "central or central_value: per_agent")


SPEC = cap.AlgorithmSpec(
    name="mappo",
    title="MAPPO / IPPO",
    module="rl_system.algos.mappo",
    config=MAPPOConfig,
    summary="Multi-agent PPO: MAPPO's critic on the global state or IPPO's on each agent's own observation, "
            "shared or per-agent parameters, any action kind per agent, an optional GRU/LSTM core.",
    paper="Yu et al. 2022, The Surprising Effectiveness of PPO in Cooperative Multi-Agent Games; "
          "de Witt et al. 2020 (IPPO)",
    capabilities=frozenset({cap.DISCRETE, cap.MULTI_DISCRETE, cap.CONTINUOUS, cap.MULTI_AGENT, cap.AGENT_GROUPS,
                            cap.RECURRENT, cap.LEARNER_GROUP, cap.SELFPLAY, cap.EXPORT, cap.AGENT_EXPORT,
                            cap.ACTING_POLICY, cap.VIDEOS}),
    recurrent_key="mappo.recurrent",
    checks=checks,
)
