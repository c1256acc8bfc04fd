"""The physics of :mod:`rl_system.envs.air_combat`: the aircraft's and missiles' parameters (SI
units; the models that use them are described in :mod:`rl_system.envs.air_combat.env`), the
layout of the env's state tensors, and the two formulas the analysis tools share with the env
(:func:`turn_rate_limit`, :func:`wrap_angle`).

Apart from the env so that the observation builder (:mod:`rl_system.envs.air_combat.observation`),
which the env imports, reads the same numbers and state layout as the simulator.
"""

from __future__ import annotations

import math

import torch

G = 9.81                      # m/s^2
RHO = 0.736                   # kg/m^3, air density at ~5 km
MASS_KG = 12_000.0            # aircraft mass
WING_AREA_M2 = 28.0
THRUST_N = 120_000.0          # full-throttle thrust
V_TERMINAL = 600.0            # m/s, level speed at full throttle ignoring induced drag
CD0 = 2.0 * THRUST_N / (RHO * WING_AREA_M2 * V_TERMINAL ** 2)  # zero-lift drag coefficient (~0.032)
K_INDUCED = 0.12              # induced drag factor: Cd = CD0 + K_INDUCED * Cl^2
CL_MAX = 1.4                  # maximum lift coefficient
N_MAX_LATERAL = 9.0           # g, structural limit on lateral load
MAX_TURN_RATE = 0.35          # rad/s (~20 deg/s), turn rate commanded by full rudder
V_STALL = math.sqrt(2.0 * MASS_KG * G / (RHO * WING_AREA_M2 * CL_MAX))  # m/s (~90), speed floor

MISSILES_PER_SIDE = 6
FIRE_COOLDOWN_S = 2.0         # s between two launches of one side
MISSILE_THRUST_ACCEL = 200.0  # m/s^2 during the motor burn
MISSILE_BURN_S = 10.0         # s
MISSILE_DRAG_K = 1.0e-4       # 1/m: drag deceleration = K * v^2 (boost terminal ~1400 m/s)
MISSILE_MAX_G = 30.0          # g, lateral acceleration limit
PN_GAIN = 4.0                 # proportional navigation constant
MISSILE_HIT_RADIUS_M = 100.0
MISSILE_MIN_SPEED = 200.0     # m/s, self-destruct below this after burn-out
MISSILE_MAX_TOF_S = 60.0      # s, self-destruct after this time of flight

DT_BASE = 1.0 / 60.0          # s of sim time per step at time_scale 1
MAX_SUBSTEP_S = 1.0 / 30.0    # s, largest physics sub-step

START_RANGE_M = (20_000.0, 40_000.0)
START_HEADING_OFF_RAD = math.pi / 4
START_SPEED_MS = (200.0, 300.0)
START_THROTTLE = 0.7

SCRIPTED_TURN_GAIN = 3.0      # rudder per rad of bearing
SCRIPTED_FIRE_RANGE_M = 20_000.0
SCRIPTED_FIRE_CONE_RAD = math.radians(15.0)
SCRIPTED_FIRE_INTERVAL_S = 10.0
SCRIPTED_EVADE_RANGE_M = 12_000.0  # default: turn tail on red while a red missile is this close

# Internal layout (see AirCombatVecEnv): aircraft fields are rows of ``_A`` [A_FIELDS, 2, N], missile
# fields rows of ``_M`` [M_FIELDS, 2, 6, N], so that every elementwise op runs over contiguous
# memory and a side's row of N envs is one contiguous vector. The first five aircraft rows are what
# a missile needs of its target (copied side-swapped once per sub-step); the next five are the
# first five observation entries, up to a scale (one op for them).
_AX, _AY, _AVX, _AVY, _AALIVE, _ASPEED, _ASIN, _ACOS, _ATHR, _ALEFT, _AHEAD, _ARUD, _ACOOL = range(13)
_A_FIELDS = 13
_OBS_HEAD_SCALE = (1.0 / V_TERMINAL, 1.0, 1.0, 1.0, 1.0 / MISSILES_PER_SIDE)  # obs 0..4 = rows _ASPEED.._ALEFT
_MX, _MY, _MACT, _MV, _MC, _MS, _MTOF = range(7)  # position, in flight, speed, heading cos/sin, time of flight
_M_FIELDS = 7
_NO_MISSILE_R2 = 1.0e12       # m^2, stands in for the range^2 of an empty slot (sqrt: 1000 km)
_BURN_OFFSET = 1.0e4          # m/s added to a burning missile's speed in the slow self-destruct test


def turn_rate_limit(speed: torch.Tensor) -> torch.Tensor:
    """Largest turn rate (rad/s) an aircraft at ``speed`` can fly: full rudder, lift (``Cl_max``,
    with 1 g of it holding the aircraft up) and the structural lateral load limit."""
    q_s = (0.5 * RHO * WING_AREA_M2) * speed * speed
    a_lift = ((q_s * (CL_MAX / MASS_KG)).square() - G * G).clamp_min(0.0).sqrt()
    a_lat = a_lift.clamp_max(N_MAX_LATERAL * G)
    return (a_lat / speed).clamp_max(MAX_TURN_RATE)



def wrap_angle(angle: torch.Tensor) -> torch.Tensor:
    """Wrap to ``[-pi, pi)`` in place."""
    return angle.add_(math.pi).remainder_(2 * math.pi).sub_(math.pi)

