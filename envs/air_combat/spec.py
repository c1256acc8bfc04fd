"""The interface of :class:`rl_system.envs.air_combat.AirCombatVecEnv`, without its physics.

What a policy, an opponent or a reward module reads of a duel: the observation layout (the index
of every entry of ``obs["obs"]`` ``[N, OBS_DIM]``), the discrete action layout, the side numbers
and the ``info["outcome"]`` codes. It lives apart from the simulator so that
:mod:`rl_system.envs.air_combat.rewards` can read it while :mod:`rl_system.envs.air_combat.env` imports the
rewards: both import this module and neither imports the other's importer. The package
re-exports every name, so ``from rl_system.envs.air_combat import OBS_RANGE`` works as well. The
meaning of each entry is in the module docstring of :mod:`rl_system.envs.air_combat.env`.
"""

from __future__ import annotations

RED, BLUE = 0, 1  # side 0 is the learner, side 1 the opponent

RANGE_SCALE_M = 50_000.0  # ranges in the observation are in units of this
OBS_DIM = 16
OBS_SPEED, OBS_MISSILES_LEFT, OBS_RANGE, OBS_BEARING_SIN, OBS_BEARING_COS, OBS_CLOSURE = 0, 4, 5, 6, 7, 8
OBS_WARNING, OBS_MISSILE_RANGE, OBS_MISSILE_BEARING_SIN, OBS_MISSILE_BEARING_COS, OBS_IN_FLIGHT = 11, 12, 13, 14, 15

# Discrete action a = 6 * fire + 2 * rudder_idx + throttle_idx.
N_DISCRETE_ACTIONS = 12
ACTION_STRAIGHT_FULL = 3
RUDDER_LEVELS = (-1.0, 0.0, 1.0)
THROTTLE_LEVELS = (0.5, 1.0)

OUTCOME_RUNNING, OUTCOME_WIN, OUTCOME_LOSS, OUTCOME_DRAW, OUTCOME_TIMEOUT = 0, 1, 2, 3, 4
