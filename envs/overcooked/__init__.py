"""Overcooked (overcooked-ai 1.1.0) as a batched multi-agent tensor env: :class:`OvercookedVecEnv`.

``make_env("Overcooked", num_envs, layout="cramped_room")``; :func:`layout_names` lists the layouts.
"""

from rl_system.envs.overcooked.env import OvercookedVecEnv
from rl_system.envs.overcooked.layout import Layout, layout_names, load_layout

__all__ = ["Layout", "OvercookedVecEnv", "layout_names", "load_layout"]
