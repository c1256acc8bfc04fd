"""HMASD's registry entry (:mod:`rl_system.algos.registry`). Torch-free."""

from __future__ import annotations

from rl_system.algos import spec as cap
from rl_system.algos.hmasd.config import HMASDConfig

SPEC = cap.AlgorithmSpec(
    name="hmasd",
    title="HMASD (and flat MAPPO)",
    module="rl_system.algos.hmasd",
    config=HMASDConfig,
    summary="Hierarchical multi-agent skill discovery: a transformer skill coordinator over team and individual "
            "skills, GRU skill discoverers, discriminators for the intrinsic rewards; hmasd.hierarchy: false trains "
            "flat recurrent MAPPO with the same code.",
    paper="Yang et al. 2023, Hierarchical Multi-Agent Skill Discovery (NeurIPS)",
    capabilities=frozenset({cap.DISCRETE, cap.MULTI_AGENT, cap.RECURRENT, cap.LEARNER_GROUP, cap.GREEDY_LEVELS}),
    recurrent_key="hmasd.hidden",
    greedy_levels=lambda cfg: bool(cfg.hmasd.hierarchy),
)
