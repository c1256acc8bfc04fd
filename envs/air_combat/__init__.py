"""AirCombat: batched 2D mid-range air combat, red against a scripted or pluggable blue.

One env in several modules, one role each:

* :mod:`.env`: :class:`AirCombatVecEnv`, the duel itself (its docstring describes the models,
  observation, action, reward and opponent);
* :mod:`.spec`: the interface a policy, an opponent or a reward module reads (observation indices,
  action layout, sides, outcome codes);
* :mod:`.physics`: the aircraft's and missiles' parameters and the state layout;
* :mod:`.observation`: the batched observation builder;
* :mod:`.rewards`: reward-shaping plug-ins named in a config;
* :mod:`.envelope`, :mod:`.envelope_plot`: the missile's launch envelope and its pictures
  (``rl-system air-combat range-map``);
* :mod:`.launches`: the launch log (``rl-system eval RUN --launch-map``);
* :mod:`.render`: the episode renderer (``rl-system eval CHECKPOINT --render``/``--video``).

The package exports the env, its parameters and its interface, so ``rl_system.envs.air_combat:AirCombatVecEnv``
and ``from rl_system.envs.air_combat import OBS_RANGE`` read as they always have. The analysis and drawing
modules are imported only where used.
"""

from rl_system.envs.air_combat.env import AirCombatVecEnv, Opponent  # noqa: F401 - re-exported
from rl_system.envs.air_combat.physics import (  # noqa: F401 - re-exported
    CD0,
    CL_MAX,
    DT_BASE,
    FIRE_COOLDOWN_S,
    K_INDUCED,
    MASS_KG,
    MAX_SUBSTEP_S,
    MAX_TURN_RATE,
    MISSILE_BURN_S,
    MISSILE_DRAG_K,
    MISSILE_HIT_RADIUS_M,
    MISSILE_MAX_G,
    MISSILE_MAX_TOF_S,
    MISSILE_MIN_SPEED,
    MISSILE_THRUST_ACCEL,
    MISSILES_PER_SIDE,
    N_MAX_LATERAL,
    PN_GAIN,
    RHO,
    SCRIPTED_EVADE_RANGE_M,
    SCRIPTED_FIRE_CONE_RAD,
    SCRIPTED_FIRE_INTERVAL_S,
    SCRIPTED_FIRE_RANGE_M,
    SCRIPTED_TURN_GAIN,
    START_HEADING_OFF_RAD,
    START_RANGE_M,
    START_SPEED_MS,
    START_THROTTLE,
    THRUST_N,
    V_STALL,
    V_TERMINAL,
    WING_AREA_M2,
    G,
    turn_rate_limit,
    wrap_angle,
)
from rl_system.envs.air_combat.rewards import build_reward_modules  # noqa: F401 - re-exported
from rl_system.envs.air_combat.spec import (  # noqa: F401 - re-exported
    ACTION_STRAIGHT_FULL,
    BLUE,
    N_DISCRETE_ACTIONS,
    OBS_BEARING_COS,
    OBS_BEARING_SIN,
    OBS_CLOSURE,
    OBS_DIM,
    OBS_IN_FLIGHT,
    OBS_MISSILE_BEARING_COS,
    OBS_MISSILE_BEARING_SIN,
    OBS_MISSILE_RANGE,
    OBS_MISSILES_LEFT,
    OBS_RANGE,
    OBS_SPEED,
    OBS_WARNING,
    OUTCOME_DRAW,
    OUTCOME_LOSS,
    OUTCOME_RUNNING,
    OUTCOME_TIMEOUT,
    OUTCOME_WIN,
    RANGE_SCALE_M,
    RED,
    RUDDER_LEVELS,
    THROTTLE_LEVELS,
)
