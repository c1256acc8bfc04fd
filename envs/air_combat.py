"""Batched 2D mid-range air combat (in the spirit of midrangeRL): ``N`` one-versus-one duels.

Each env holds two point-mass aircraft, **red** (side 0, the learner) and **blue** (side 1, the
opponent), flying in a horizontal plane, plus 6 missile slots per side. Everything is a torch
tensor with a leading batch dimension; aircraft state is ``[N, 2]`` (side), missile state is
``[N, 2, 6]`` (launching side, slot) and all missiles of all envs advance in one batched step
(no Python loops over envs or missiles).

Aircraft model (SI units, constants below)
    Position ``(x, y)`` m, speed m/s, heading rad, throttle ``[0, 1]``, rudder ``[-1, 1]``.
    Thrust ``throttle * THRUST_N``; drag ``q S (CD0 + K_INDUCED Cl^2)`` with ``q = RHO v^2 / 2``
    and ``CD0`` derived so that the terminal (maximum level) speed at full throttle without lift is
    ``V_TERMINAL``. The lift coefficient holds the aircraft up (1 g) and turns it:
    ``Cl = m * hypot(g, v * omega) / (q S)``, so turning bleeds energy through induced drag.
    Turn rate ``omega = rudder * MAX_TURN_RATE`` clipped to the lift limit
    :func:`turn_rate_limit` (``Cl <= CL_MAX`` and lateral load ``<= N_MAX_LATERAL`` g).
    Speed is clamped to ``[V_STALL, V_TERMINAL]`` (below stall the aircraft would have to trade
    altitude, which this 2D model does not simulate). Throttle and rudder take the commanded
    values immediately.
Missiles
    6 per side. Firing launches the next unused slot (``slot = 6 - missiles_left``) from the
    aircraft's position, speed and heading. ``MISSILE_BURN_S`` of motor thrust
    (``MISSILE_THRUST_ACCEL``), then coast; drag ``MISSILE_DRAG_K * v^2`` throughout. Guidance
    is proportional navigation: heading rate ``= PN_GAIN * line-of-sight rate``, limited to
    ``MISSILE_MAX_G`` g of lateral acceleration. A missile's target is always the opposing
    aircraft (one aircraft per side, so nothing needs storing). Hit: within ``MISSILE_HIT_RADIUS_M``
    of a live target, checked every physics sub-step (missile position at the start of the
    sub-step against the target's already-advanced one); the target is destroyed. Only the
    slots in flight are gathered and advanced, so the cost grows with the missiles in flight. Self-destruct:
    speed ``< MISSILE_MIN_SPEED`` after motor burn-out, or time of flight ``> MISSILE_MAX_TOF_S``.
Fire rule (also the action mask)
    A side may fire when it is alive, has missiles left and its launch cooldown
    (``FIRE_COOLDOWN_S`` of sim time since its previous launch) has run out. An illegal fire
    command is ignored (the rest of the action still applies).

Time
    One ``step`` advances ``dt = time_scale / 60`` s of sim time, integrated in
    ``ceil(dt / MAX_SUBSTEP_S)`` equal sub-steps (semi-implicit Euler), so the physics is the
    same for any ``time_scale`` in ``[0.5, 8]`` (and beyond); the sub-step bound also keeps a
    missile from skipping through the hit radius at closing speeds below ~6 km/s.

Observation (red's view; blue's is built by the same function with the sides swapped)
    ``"obs"``: float32 ``[N, 16]`` (``OBS_DIM``), all relative to the observer, so a policy
    trained as red can fly blue:

    ====  ==============================================================
    0     own speed / V_TERMINAL
    1, 2  sin, cos of own heading
    3     own throttle
    4     own missiles left / 6
    5     range to enemy / RANGE_SCALE_M (50 km), not clipped
    6, 7  sin, cos of the enemy's bearing relative to own heading
    8     closure rate / (2 V_TERMINAL)  (positive = closing)
    9, 10 sin, cos of enemy heading minus own heading
    11    incoming-missile warning: 1 if any enemy missile is in flight
    12    range to the nearest enemy missile / RANGE_SCALE_M, clipped to 1 (1 if none)
    13,14 sin, cos of that missile's bearing relative to own heading (0 if none)
    15    own missiles in flight / 6
    ====  ==============================================================

    ``"action_mask"`` (discrete actions only): bool ``[N, 12]``; the fire actions (6..11) are
    ``False`` where the fire rule above forbids launching.
Action
    ``action_type="discrete"``: ``Discrete(12)``, ``a = 6 * fire + 2 * rudder_idx + throttle_idx``
    with rudder ``(-1, 0, +1)[rudder_idx]`` and throttle ``(0.5, 1.0)[throttle_idx]``
    (``ACTION_STRAIGHT_FULL = 3``: straight, full throttle, no fire).
    ``action_type="continuous"``: ``Box(3)``: rudder ``[-1, 1]``, throttle ``[0, 1]`` (both
    clipped), fire where ``> 0.5``.
Opponent
    ``opponent="scripted"``: batched pursuit: turn toward red (rudder ``∝`` bearing), full
    throttle, fire when red is within ``SCRIPTED_FIRE_RANGE_M`` and within
    ``SCRIPTED_FIRE_CONE_RAD`` of the nose, at most every ``SCRIPTED_FIRE_INTERVAL_S``.
    Or any object with ``act(obs_dict_for_blue) -> action`` returning an action in this env's
    action format (``[N]`` int64 or ``[N, 3]`` float32), e.g. a frozen policy snapshot for
    self-play; its observation comes from the same (mirrored) function as red's.
Reward (float32 ``[N]``)
    Terminal: ``+1`` win (blue destroyed, red alive), ``-1`` loss, ``0`` draw (both destroyed in
    the same step) or timeout. Plus the sum of ``reward_modules``: objects following
    :class:`RewardModule` (``compute(obs_before, obs_after, action, done, info) -> [N]``);
    ``obs_after`` is the pre-reset observation (``final_obs``). :class:`PursuitShaping` is an
    example.
Termination / truncation
    ``terminated`` when either aircraft is destroyed; ``truncated`` when ``max_time_s`` of sim
    time has passed (``terminated`` wins where both). ``info["outcome"]`` int8 ``[N]``:
    ``0`` running, ``1`` win, ``2`` loss, ``3`` draw, ``4`` timeout (valid where done).
Start state
    Red at the origin, blue at range ``U(START_RANGE_M)`` on a uniform random bearing; each
    heads toward the other ``± U(START_HEADING_OFF_RAD)``; speeds ``U(START_SPEED_MS)``,
    throttle ``START_THROTTLE``; 6 missiles each, none in flight. Drawn from a
    ``torch.Generator`` (``seed`` makes the batch reproducible on a device).
Auto-reset
    ``SAME_STEP`` (see :mod:`envs.base`). ``state_dict``/``load_state_dict`` capture everything,
    RNG included.
"""

from __future__ import annotations

import math
from typing import Any, Protocol, Sequence, runtime_checkable

import torch

from envs.base import Box, Discrete, Obs, StepResult, TensorSpec, VecEnv, make_generator

# --------------------------------------------------------------------------- parameters
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

RANGE_SCALE_M = 50_000.0
OBS_DIM = 16
# Indices into the observation, for reward modules and opponents.
OBS_SPEED, OBS_MISSILES_LEFT, OBS_RANGE, OBS_BEARING_SIN, OBS_BEARING_COS, OBS_CLOSURE = 0, 4, 5, 6, 7, 8
OBS_WARNING = 11

N_DISCRETE_ACTIONS = 12
ACTION_STRAIGHT_FULL = 3
RUDDER_LEVELS = (-1.0, 0.0, 1.0)
THROTTLE_LEVELS = (0.5, 1.0)

OUTCOME_RUNNING, OUTCOME_WIN, OUTCOME_LOSS, OUTCOME_DRAW, OUTCOME_TIMEOUT = 0, 1, 2, 3, 4
RED, BLUE = 0, 1
_M_FIELDS = 7  # missile row: x, y, speed, heading, time of flight, cos(heading), sin(heading)


def turn_rate_limit(speed: torch.Tensor) -> torch.Tensor:
    """Largest turn rate (rad/s) an aircraft at ``speed`` can fly: full rudder, lift (``Cl_max``,
    with 1 g of it holding the aircraft up) and the structural lateral load limit."""
    q_s = (0.5 * RHO * WING_AREA_M2) * speed * speed
    a_lift = ((q_s * (CL_MAX / MASS_KG)).square() - G * G).clamp_min(0.0).sqrt()
    a_lat = a_lift.clamp_max(N_MAX_LATERAL * G)
    return (a_lat / speed).clamp_max(MAX_TURN_RATE)


@runtime_checkable
class RewardModule(Protocol):
    """Pluggable reward shaping; the env adds ``compute(...)`` of every module to its reward.

    ``obs_before``: red's observation the action was chosen on; ``obs_after``: red's observation
    after the step, before any auto-reset (``final_obs``); ``action``: red's action as passed to
    ``step``; ``done``: bool ``[N]``; ``info``: the step's info dict. Returns float ``[N]``."""

    def compute(self, obs_before: Obs, obs_after: Obs, action: torch.Tensor, done: torch.Tensor,
                info: dict[str, torch.Tensor]) -> torch.Tensor: ...


class PursuitShaping:
    """Example shaping: ``closing_coef * (range_before - range_after) / RANGE_SCALE`` per metre
    closed plus ``pointing_coef * cos(bearing)`` per step (nose on the enemy). Small by default
    so that the terminal ``±1`` dominates over an episode."""

    def __init__(self, closing_coef: float = 1.0, pointing_coef: float = 1e-4) -> None:
        self.closing_coef = closing_coef
        self.pointing_coef = pointing_coef

    def compute(self, obs_before: Obs, obs_after: Obs, action: torch.Tensor, done: torch.Tensor,
                info: dict[str, torch.Tensor]) -> torch.Tensor:
        before, after = obs_before["obs"], obs_after["obs"]
        closing = before[:, OBS_RANGE] - after[:, OBS_RANGE]
        return self.closing_coef * closing + self.pointing_coef * after[:, OBS_BEARING_COS]


def _wrap(angle: torch.Tensor) -> torch.Tensor:
    """Wrap to ``[-pi, pi)`` in place."""
    return angle.add_(math.pi).remainder_(2 * math.pi).sub_(math.pi)


class AirCombatVecEnv(VecEnv):
    """``num_envs`` red-vs-blue air-combat duels as tensors on ``device``; see the module docstring."""

    def __init__(self, num_envs: int, device: str | torch.device = "cpu", seed: int | None = None,
                 time_scale: float = 1.0, max_time_s: float = 300.0, opponent: Any = "scripted",
                 action_type: str = "discrete", reward_modules: Sequence[RewardModule] = ()) -> None:
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        if not time_scale > 0:
            raise ValueError(f"time_scale must be > 0, got {time_scale}")
        if action_type not in ("discrete", "continuous"):
            raise ValueError(f"action_type must be 'discrete' or 'continuous', got {action_type!r}")
        if isinstance(opponent, str):
            if opponent != "scripted":
                raise ValueError(f"unknown opponent {opponent!r}; use 'scripted' or an object with act()")
        elif not callable(getattr(opponent, "act", None)):
            raise TypeError("opponent must be 'scripted' or have an act(obs_dict) method")
        self.num_envs = n = int(num_envs)
        self.device = dev = torch.device(device)
        self.time_scale = float(time_scale)
        self.dt = DT_BASE * self.time_scale
        self.substeps = max(1, math.ceil(self.dt / MAX_SUBSTEP_S - 1e-9))
        self.sub_dt = self.dt / self.substeps
        self.max_time_s = float(max_time_s)
        self.max_steps = max(1, round(self.max_time_s / self.dt))
        self.opponent = opponent
        self.action_type = action_type
        self.reward_modules = list(reward_modules)
        self.discrete = action_type == "discrete"
        self.observation_spec = {"obs": TensorSpec(shape=(OBS_DIM,), dtype=torch.float32)}
        if self.discrete:
            self.action_spec = Discrete(N_DISCRETE_ACTIONS)
            self.observation_spec["action_mask"] = TensorSpec(shape=(N_DISCRETE_ACTIONS,), dtype=torch.bool)
        else:
            self.action_spec = Box(shape=(3,), low=(-1.0, 0.0, 0.0), high=(1.0, 1.0, 1.0))

        self._generator = make_generator(dev, seed)

        f32 = dict(dtype=torch.float32, device=dev)
        m = MISSILES_PER_SIDE
        # Aircraft [N, 2] (side 0 red, 1 blue).
        self._x = torch.zeros(n, 2, **f32)
        self._y = torch.zeros(n, 2, **f32)
        self._speed = torch.zeros(n, 2, **f32)
        self._heading = torch.zeros(n, 2, **f32)
        self._throttle = torch.zeros(n, 2, **f32)
        self._rudder = torch.zeros(n, 2, **f32)
        self._alive = torch.ones(n, 2, dtype=torch.bool, device=dev)
        self._left = torch.zeros(n, 2, dtype=torch.int64, device=dev)
        self._cooldown = torch.zeros(n, 2, **f32)          # s until the side may fire again
        self._script_cooldown = torch.zeros(n, **f32)      # scripted opponent's own interval
        # Missiles [N, 2 launching side, 6 slots].
        self._m_active = torch.zeros(n, 2, m, dtype=torch.bool, device=dev)
        # The float state of a slot is one row of ``_m_state`` [N, 2, 6, M_FIELDS], so that the
        # in-flight slots gather and scatter in one indexing op each; the names are views.
        self._m_state = torch.zeros(n, 2, m, _M_FIELDS, **f32)
        (self._m_x, self._m_y, self._m_speed, self._m_heading, self._m_tof,
         self._m_cos, self._m_sin) = self._m_state.unbind(-1)             # cos/sin of the heading
        self._steps = torch.zeros(n, dtype=torch.int64, device=dev)

        self._rudder_table = torch.tensor([RUDDER_LEVELS[(a % 6) // 2] for a in range(12)], **f32)
        self._throttle_table = torch.tensor([THROTTLE_LEVELS[a % 2] for a in range(12)], **f32)
        self._fire_table = torch.tensor([a >= 6 for a in range(12)], dtype=torch.bool, device=dev)
        self._last_obs: Obs | None = None
        self._needs_reset = True

    # ------------------------------------------------------------------ public API

    _STATE_KEYS = ("_x", "_y", "_speed", "_heading", "_throttle", "_rudder", "_alive", "_left",
                   "_cooldown", "_script_cooldown", "_m_active", "_m_x", "_m_y", "_m_speed",
                   "_m_heading", "_m_tof", "_steps")  # _m_cos/_m_sin are recomputed on load

    def reset(self, seed: int | None = None) -> Obs:
        """Reset all envs; ``seed`` reseeds the generator (else it continues its stream)."""
        if seed is not None:
            self._generator.manual_seed(seed)
        self._reset_envs(torch.arange(self.num_envs, device=self.device))
        self._needs_reset = False
        obs = self.observe(RED)
        self._last_obs = obs
        return obs

    def state_dict(self) -> dict[str, torch.Tensor]:
        state = {k.lstrip("_"): getattr(self, k).clone() for k in self._STATE_KEYS}
        state["generator"] = self._generator.get_state()
        return state

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        for k in self._STATE_KEYS:
            getattr(self, k).copy_(state[k.lstrip("_")])
        self._generator.set_state(state["generator"])
        torch.cos(self._m_heading, out=self._m_cos)
        torch.sin(self._m_heading, out=self._m_sin)
        self._needs_reset = False
        self._last_obs = self.observe(RED)

    def observe(self, side: int, rows: torch.Tensor | None = None) -> Obs:
        """The observation dict of ``side`` (0 red, 1 blue); blue's is red's mirrored. With
        ``rows`` (int64 env indices) only those envs' observations, ``[len(rows), ...]``."""
        own, foe = side, 1 - side
        if rows is None:
            x, y, speed, heading = self._x, self._y, self._speed, self._heading
            throttle, left, m_active, m_x, m_y = self._throttle, self._left, self._m_active, self._m_x, self._m_y
            can_fire = self._can_fire()
        else:
            x, y, speed, heading = self._x[rows], self._y[rows], self._speed[rows], self._heading[rows]
            throttle, left, m_active = self._throttle[rows], self._left[rows], self._m_active[rows]
            m_x, m_y = self._m_x[rows], self._m_y[rows]
            can_fire = self._alive[rows] & (left > 0) & (self._cooldown[rows] <= 0.0)
        ox, oy, ov, oh = x[:, own], y[:, own], speed[:, own], heading[:, own]
        ex, ey, ev, eh = x[:, foe], y[:, foe], speed[:, foe], heading[:, foe]
        n = ox.shape[0]
        cos_oh, sin_oh = torch.cos(oh), torch.sin(oh)
        dx, dy = ex - ox, ey - oy
        rng = torch.hypot(dx, dy)
        bearing = torch.atan2(dy, dx).sub_(oh)
        dvx = torch.cos(eh).mul_(ev).sub_(ov * cos_oh)
        dvy = torch.sin(eh).mul_(ev).sub_(ov * sin_oh)
        closure = (dx * dvx).add_(dy * dvy).div_(rng.clamp_min(1.0)).mul_(-0.5 / V_TERMINAL)
        rel = eh - oh
        # Nearest incoming (enemy) missile.
        active = m_active[:, foe]
        mdx = m_x[:, foe] - ox.unsqueeze(1)
        mdy = m_y[:, foe] - oy.unsqueeze(1)
        mr = torch.hypot(mdx, mdy).masked_fill_(~active, math.inf)
        mr_min, idx = mr.min(dim=1, keepdim=True)
        present = active.any(dim=1).float()
        mb = torch.atan2(mdy.gather(1, idx), mdx.gather(1, idx)).squeeze(1).sub_(oh)
        out = torch.stack((
            ov / V_TERMINAL, sin_oh, cos_oh, throttle[:, own],
            left[:, own] / MISSILES_PER_SIDE,
            rng / RANGE_SCALE_M, torch.sin(bearing), torch.cos(bearing), closure,
            torch.sin(rel), torch.cos(rel),
            present, (mr_min.squeeze(1) / RANGE_SCALE_M).clamp_max_(1.0),
            torch.sin(mb).mul_(present), torch.cos(mb).mul_(present),
            m_active[:, own].sum(dim=1) / MISSILES_PER_SIDE), dim=1)
        obs = {"obs": out}
        if self.discrete:
            mask = torch.ones(n, N_DISCRETE_ACTIONS, dtype=torch.bool, device=self.device)
            mask[:, 6:] = can_fire[:, own].unsqueeze(1)
            obs["action_mask"] = mask
        return obs

    def step(self, action: torch.Tensor) -> StepResult:
        if self._needs_reset:
            raise RuntimeError("call reset() before step()")
        action = action.to(self.device)
        red_rudder, red_throttle, red_fire = self._decode(action)
        blue_rudder, blue_throttle, blue_fire = self._opponent_action()
        self._rudder[:, RED] = red_rudder
        self._rudder[:, BLUE] = blue_rudder
        self._throttle[:, RED] = red_throttle
        self._throttle[:, BLUE] = blue_throttle
        fire = torch.stack((red_fire, blue_fire), dim=1) & self._can_fire()
        if bool(fire.any()):
            self._launch(fire)

        for _ in range(self.substeps):
            self._substep(self.sub_dt)
        self._cooldown.sub_(self.dt).clamp_min_(0.0)
        self._script_cooldown.sub_(self.dt).clamp_min_(0.0)
        self._steps.add_(1)

        red_alive, blue_alive = self._alive[:, RED], self._alive[:, BLUE]
        terminated = ~(red_alive & blue_alive)
        truncated = self._steps >= self.max_steps
        done = terminated | truncated
        outcome = torch.zeros(self.num_envs, dtype=torch.int8, device=self.device)
        outcome.masked_fill_(truncated, OUTCOME_TIMEOUT)
        win = red_alive & ~blue_alive
        loss = ~red_alive & blue_alive
        outcome.masked_fill_(win, OUTCOME_WIN)
        outcome.masked_fill_(loss, OUTCOME_LOSS)
        outcome.masked_fill_(~red_alive & ~blue_alive, OUTCOME_DRAW)
        reward = win.float() - loss.float()
        info = {"outcome": outcome}

        final_obs = self.observe(RED)
        if self.reward_modules:
            for module in self.reward_modules:
                reward += module.compute(self._last_obs, final_obs, action, done, info).to(reward.dtype)
        idx = done.nonzero().squeeze(1)
        if idx.numel():
            self._reset_envs(idx)
            fresh = self.observe(RED, idx)
            obs = {k: v.index_copy(0, idx, fresh[k]) for k, v in final_obs.items()}
        else:
            obs = final_obs
        self._last_obs = obs
        return StepResult(obs, reward, terminated, truncated, final_obs, info)

    # ------------------------------------------------------------------ internals

    def _can_fire(self) -> torch.Tensor:
        return self._alive & (self._left > 0) & (self._cooldown <= 0.0)

    def _decode(self, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        n = self.num_envs
        if self.discrete:
            if action.shape != (n,):
                raise ValueError(f"action must have shape ({n},), got {tuple(action.shape)}")
            if action.is_floating_point():
                raise TypeError(f"discrete actions must be integers, got {action.dtype}")
            action = action.long()
            return (self._rudder_table[action], self._throttle_table[action], self._fire_table[action])
        if action.shape != (n, 3):
            raise ValueError(f"action must have shape ({n}, 3), got {tuple(action.shape)}")
        action = action.float()
        return action[:, 0].clamp(-1.0, 1.0), action[:, 1].clamp(0.0, 1.0), action[:, 2] > 0.5

    def _opponent_action(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if not isinstance(self.opponent, str):
            with torch.no_grad():
                act = self.opponent.act(self.observe(BLUE))
            return self._decode(torch.as_tensor(act, device=self.device))
        # Scripted pursuit, straight from the state.
        dx = self._x[:, RED] - self._x[:, BLUE]
        dy = self._y[:, RED] - self._y[:, BLUE]
        bearing = _wrap(torch.atan2(dy, dx) - self._heading[:, BLUE])
        rudder = (bearing * SCRIPTED_TURN_GAIN).clamp_(-1.0, 1.0)
        throttle = torch.ones_like(rudder)
        fire = ((dx * dx + dy * dy) < SCRIPTED_FIRE_RANGE_M ** 2) & (bearing.abs() < SCRIPTED_FIRE_CONE_RAD)
        fire &= self._script_cooldown <= 0.0
        fire &= self._can_fire()[:, BLUE]
        self._script_cooldown.masked_fill_(fire, SCRIPTED_FIRE_INTERVAL_S)
        return rudder, throttle, fire

    def _launch(self, fire: torch.Tensor) -> None:
        """Launch the next free slot of every side where ``fire`` ([N, 2] bool, already legal).
        Index-based: only the launching (env, side) pairs are touched."""
        flat = fire.view(-1).nonzero().squeeze(1)                       # env * 2 + side
        slot = flat * MISSILES_PER_SIDE + (MISSILES_PER_SIDE - self._left.view(-1)[flat])
        x, y = self._x.view(-1)[flat], self._y.view(-1)[flat]
        speed, heading = self._speed.view(-1)[flat], self._heading.view(-1)[flat]
        rows = torch.stack((x, y, speed, heading, torch.zeros_like(x), torch.cos(heading), torch.sin(heading)), 1)
        self._m_state.view(-1, _M_FIELDS)[slot] = rows
        self._m_active.view(-1)[slot] = True
        self._left.sub_(fire.long())
        self._cooldown.masked_fill_(fire, FIRE_COOLDOWN_S)

    def _substep(self, dt: float) -> None:
        # ---- aircraft: lift-limited turn, thrust - (parasite + induced) drag.
        v, heading = self._speed, self._heading
        omega = (self._rudder * MAX_TURN_RATE)
        lim = turn_rate_limit(v)
        omega = torch.minimum(torch.maximum(omega, -lim), lim)
        q_s = (0.5 * RHO * WING_AREA_M2) * v * v
        a_lat = v * omega
        # Cl^2 = (m * hypot(g, a_lat) / qS)^2 ; drag/m = qS*CD0/m + K * m * (g^2 + a_lat^2) / qS
        drag_acc = q_s * (CD0 / MASS_KG) + (K_INDUCED * MASS_KG) * (a_lat * a_lat + G * G) / q_s
        accel = self._throttle * (THRUST_N / MASS_KG) - drag_acc
        heading.add_(omega * dt)
        _wrap(heading)
        v.add_(accel * dt).clamp_(V_STALL, V_TERMINAL)
        cos_h, sin_h = torch.cos(heading), torch.sin(heading)
        self._x.add_(v * cos_h * dt)
        self._y.add_(v * sin_h * dt)

        # ---- missiles: only the slots in flight, gathered into flat [K] tensors (on average a
        # small fraction of the N * 2 * 6 slots), advanced, and scattered back. Flat slot index
        # = (env * 2 + side) * 6 + slot; the target of side s is the aircraft of side 1 - s,
        # i.e. flat aircraft index (env * 2 + side) ^ 1. Hits are tested on the distance at the
        # start of the sub-step (to the target's already-advanced position). The missile heading
        # is not wrapped (only its cos/sin are used; it is reset at every launch).
        idx = self._m_active.view(-1).nonzero().squeeze(1)
        if idx.numel() == 0:
            return
        tgt = torch.bitwise_xor(idx // MISSILES_PER_SIDE, 1)
        target = torch.stack((self._x.view(-1), self._y.view(-1), (v * cos_h).view(-1), (v * sin_h).view(-1)), 1)[tgt]
        tx, ty, tvx, tvy = target.unbind(1)
        flat_state = self._m_state.view(-1, _M_FIELDS)
        ms = flat_state[idx]                                                # [K, 7] copy
        mx, my, mv, mh, tof, mcos, msin = ms.unbind(1)                     # views into ms
        rx, ry = tx - mx, ty - my
        vrx = torch.addcmul(tvx, mv, mcos, value=-1.0)
        vry = torch.addcmul(tvy, mv, msin, value=-1.0)
        r2 = rx * rx
        r2.addcmul_(ry, ry)
        hit = (r2 < MISSILE_HIT_RADIUS_M ** 2) & self._alive.view(-1)[tgt]
        # PN: lateral acceleration N * v * LOS rate, limited to MISSILE_MAX_G; heading rate = a / v.
        los = rx * vry
        los.addcmul_(ry, vrx, value=-1.0).div_(r2.add_(1.0))
        a_lat = los.mul_(mv).mul_(PN_GAIN).clamp_(-MISSILE_MAX_G * G, MISSILE_MAX_G * G)
        mh.add_(a_lat.mul_(dt).div_(mv.clamp_min(1.0)))
        torch.cos(mh, out=mcos)
        torch.sin(mh, out=msin)
        burning = tof < MISSILE_BURN_S
        acc = burning * MISSILE_THRUST_ACCEL
        acc.addcmul_(mv, mv, value=-MISSILE_DRAG_K)
        mv.add_(acc.mul_(dt)).clamp_min_(0.0)
        step_len = mv * dt
        mx.addcmul_(mcos, step_len)
        my.addcmul_(msin, step_len)
        tof.add_(dt)
        flat_state[idx] = ms
        if bool(hit.any()):
            self._alive.view(-1)[tgt[hit]] = False
        gone = (mv < MISSILE_MIN_SPEED).logical_and_(~burning).logical_or_(tof > MISSILE_MAX_TOF_S)
        gone.logical_or_(hit)
        self._m_active.view(-1)[idx[gone]] = False

    def _reset_envs(self, idx: torch.Tensor) -> None:
        k = idx.numel()
        g, dev = self._generator, self.device
        u = torch.rand(k, 6, generator=g, device=dev)
        rng = START_RANGE_M[0] + (START_RANGE_M[1] - START_RANGE_M[0]) * u[:, 0]
        theta = (u[:, 1] * 2 - 1) * math.pi
        off = (u[:, 2:4] * 2 - 1) * START_HEADING_OFF_RAD
        speed = START_SPEED_MS[0] + (START_SPEED_MS[1] - START_SPEED_MS[0]) * u[:, 4:6]
        zeros = torch.zeros(k, device=dev)
        x = torch.stack((zeros, rng * torch.cos(theta)), 1)
        y = torch.stack((zeros, rng * torch.sin(theta)), 1)
        heading = _wrap(torch.stack((theta, theta + math.pi), 1) + off)
        self._x.index_copy_(0, idx, x)
        self._y.index_copy_(0, idx, y)
        self._speed.index_copy_(0, idx, speed)
        self._heading.index_copy_(0, idx, heading)
        self._throttle.index_fill_(0, idx, START_THROTTLE)
        self._rudder.index_fill_(0, idx, 0.0)
        self._alive.index_fill_(0, idx, True)
        self._left.index_fill_(0, idx, MISSILES_PER_SIDE)
        self._cooldown.index_fill_(0, idx, 0.0)
        self._script_cooldown.index_fill_(0, idx, 0.0)
        self._m_active.index_fill_(0, idx, False)
        self._m_state.index_fill_(0, idx, 0.0)
        self._steps.index_fill_(0, idx, 0)
