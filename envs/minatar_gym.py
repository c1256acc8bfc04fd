"""MinAtar's Gymnasium ids (Young & Tian 2019, the ``minatar`` package): importing this module
registers ``MinAtar/<Game>-v0`` (full action set) and ``MinAtar/<Game>-v1`` (minimal action set)
for Asterix, Breakout, Freeway, Seaquest and SpaceInvaders, which the package itself only does
when its ``register_envs()`` is called. Use them as
``env.name: gym:rl_system.envs.minatar_gym:MinAtar/Breakout-v1``; every worker imports this module first.

Observations are bool ``[10, 10, C]`` planes (kept bool by the Gymnasium adapter: one byte per
cell on the wire); the default encoder for them is the MinAtar paper's small CNN (``conv``).
The game defaults are the paper's: sticky actions with probability 0.1, difficulty ramping.
"""

from __future__ import annotations

import gymnasium

try:
    from minatar.gym import register_envs
except ImportError as err:  # pragma: no cover - depends on the optional extra
    raise ImportError("MinAtar is not installed: pip install minatar, or pip install -e '.[minatar]' in a checkout") from err

if "MinAtar/Breakout-v1" not in gymnasium.registry:
    register_envs()
