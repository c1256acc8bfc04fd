"""Batched 2D mid-range air combat (in the spirit of midrangeRL): ``N`` one-versus-one duels.

Each env holds two point-mass aircraft, **red** (side 0, the learner) and **blue** (side 1, the
opponent), flying in a horizontal plane, plus 6 missile slots per side. Everything is a torch
tensor with a leading batch dimension (state dict layout: aircraft ``[N, 2]`` (side), missiles
``[N, 2, 6]`` (launching side, slot)); both sides and all missiles of all envs advance in one
batched step (no Python loops over envs, sides or missiles).

Aircraft model (SI units; the constants are in :mod:`rl_system.envs.air_combat.physics`)
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
    ``MISSILE_MAX_G`` g of lateral acceleration (the heading is kept as its cos/sin, rotated by the
    sub-step's turn angle). A missile's target is always the opposing aircraft (one aircraft per
    side, so nothing needs storing). Hit: within ``MISSILE_HIT_RADIUS_M`` of a live target, checked
    every physics sub-step (missile position at the start of the sub-step against the target's
    already-advanced one); the target is destroyed. Self-destruct: speed ``< MISSILE_MIN_SPEED``
    after motor burn-out, or time of flight ``> MISSILE_MAX_TOF_S``. All 12 slots of every env
    are updated densely every sub-step (slots not in flight advance with ``dt = 0``), so the cost
    per step does not depend on how many missiles are in flight.
Fire rule (also the action mask)
    A side may fire when it is alive, has missiles left and its launch cooldown
    (``FIRE_COOLDOWN_S`` of sim time since its previous launch) has run out. An illegal fire
    command is ignored (the rest of the action still applies).

Parameters (constructor)
    ``num_envs``, ``device``, ``seed`` (reproducible batch on a device);
    ``time_scale`` (default 1): sim seconds per step ``= time_scale / 60``;
    ``max_time_s`` (default 300): sim time after which an episode is truncated
    (``max_steps = round(max_time_s / dt)``); ``opponent`` (default ``"scripted"``, see Opponent);
    ``action_type``: ``"discrete"`` (default) or ``"continuous"``; ``reward_modules``: shaping
    terms added to the reward (see Reward); ``scripted_evade_range_m`` (default 12 km): the
    scripted opponent's missile-evasion range (see Opponent). From a run config they are
    ``env.kwargs``, e.g. ``{time_scale: 16, max_time_s: 120, reward_modules: [{name: pursuit,
    closing_coef: 1.0}]}`` (``launch/configs/air_combat_ppo.yaml``).

Time
    One ``step`` advances ``dt = time_scale / 60`` s of sim time, integrated in
    ``ceil(dt / MAX_SUBSTEP_S)`` equal sub-steps (semi-implicit Euler), so the physics is the
    same for any ``time_scale`` in ``[0.5, 8]`` (and beyond); the sub-step bound also keeps a
    missile from skipping through the hit radius at closing speeds below ~6 km/s. ``time_scale``
    up to 2 is one sub-step per step.

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
Opponent (pluggable at construction and at runtime)
    ``opponent="scripted"`` (or ``None``): batched pursuit: turn toward red (rudder ``∝``
    bearing), full throttle, fire when red is within ``SCRIPTED_FIRE_RANGE_M`` and within
    ``SCRIPTED_FIRE_CONE_RAD`` of the nose, at most every ``SCRIPTED_FIRE_INTERVAL_S``; and
    evasion: while a red missile in flight is within ``scripted_evade_range_m`` (default
    ``SCRIPTED_EVADE_RANGE_M``, 12 km; 0 turns it off), turn tail on red instead (rudder ``∝``
    bearing ``- pi sign(bearing)``). Without the evasion a uniformly random red wins every duel
    (it empties its rack at long range and blue flies into the missiles); with it random red
    wins none, and winning takes holding fire until within ~20 km on the nose, then turning away.
    Or a policy: a callable ``fn(blue_obs) -> action`` or an object with
    ``act(blue_obs) -> action`` (e.g. a frozen policy snapshot for self-play). ``blue_obs`` is
    blue's observation dict from the same (mirrored) function as red's, ``"action_mask"``
    included for discrete actions, computed in the same batched pass as red's; the action is in
    this env's action format (``[N]`` int64 or ``[N, 3]`` float32); it is called once per step
    under ``torch.no_grad()``. ``env.set_opponent(opponent)`` swaps it at runtime (``None`` goes
    back to the scripted one), effective from the next ``step``; both sides still advance in one
    batched tensor step.
Reward (float32 ``[N]``)
    Terminal: ``+1`` win (blue destroyed, red alive), ``-1`` loss, ``0`` draw (both destroyed in
    the same step) or timeout. Plus the sum of ``reward_modules`` (shaping plug-ins, named in a
    config; see :mod:`rl_system.envs.air_combat.rewards`).
Termination / truncation
    ``terminated`` when either aircraft is destroyed; ``truncated`` when ``max_time_s`` of sim
    time has passed (``terminated`` wins where both). ``info`` (valid where done):
    ``"outcome"`` int8 ``[N]``: ``0`` running, ``1`` win, ``2`` loss, ``3`` draw, ``4`` timeout;
    ``"win"`` bool ``[N]``: red won (blue destroyed, red alive), so the mean over finished
    episodes is the win rate.
Start state
    Red at the origin, blue at range ``U(START_RANGE_M)`` on a uniform random bearing; each
    heads toward the other ``± U(START_HEADING_OFF_RAD)``; speeds ``U(START_SPEED_MS)``,
    throttle ``START_THROTTLE``; 6 missiles each, none in flight. Drawn from a
    ``torch.Generator`` (``seed`` makes the batch reproducible on a device).
Auto-reset
    ``SAME_STEP`` (see :mod:`rl_system.envs.base`). ``state_dict``/``load_state_dict`` capture everything,
    RNG included (the opponent object is not part of the state).
Speed
    ``python bench/bench_air_combat.py`` measures env steps/s (figures, and how PPO was trained
    against the scripted opponent, in ``docs/air_combat.md``).
    Internally all state is float32 in side-major / slot-major tensors (``_A`` [fields, 2, N],
    ``_M`` [fields, 2, 6, N]) so that every op runs over contiguous memory; flags and counts are
    floats too (bool ops and casts are slow on CPU), trig on missiles is replaced by rotating
    the heading's cos/sin, and there are no host syncs in the physics (the only ones are the
    index lists of launches and of finished envs).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import torch

from rl_system.envs.air_combat.observation import ObsPlan
from rl_system.envs.air_combat.physics import (
    _A_FIELDS,
    _AALIVE,
    _ACOOL,
    _ACOS,
    _AHEAD,
    _ALEFT,
    _ARUD,
    _ASIN,
    _ASPEED,
    _ATHR,
    _AVX,
    _AVY,
    _AX,
    _AY,
    _BURN_OFFSET,
    _M_FIELDS,
    _MACT,
    _MC,
    _MS,
    _MTOF,
    _MV,
    _MX,
    _MY,
    _OBS_HEAD_SCALE,
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
    wrap_angle,
)
from rl_system.envs.air_combat.rewards import build_reward_modules
from rl_system.envs.air_combat.spec import (
    BLUE,
    N_DISCRETE_ACTIONS,
    OBS_DIM,
    OUTCOME_DRAW,
    OUTCOME_LOSS,
    OUTCOME_RUNNING,
    OUTCOME_TIMEOUT,
    OUTCOME_WIN,
    RED,
    RUDDER_LEVELS,
    THROTTLE_LEVELS,
)
from rl_system.envs.base import Box, Discrete, Obs, StepResult, TensorSpec, VecEnv, check_action, make_generator

Opponent = Callable[[Obs], torch.Tensor]


def _as_opponent(opponent: Any) -> Opponent | None:
    """``None`` for the scripted opponent, else the callable that maps blue's obs to blue's action."""
    if opponent is None or (isinstance(opponent, str) and opponent == "scripted"):
        return None
    if isinstance(opponent, str):
        raise ValueError(f"unknown opponent {opponent!r}; use 'scripted', a callable or an object with act()")
    act = getattr(opponent, "act", None)
    if callable(act):
        return act
    if callable(opponent):
        return opponent
    raise TypeError("opponent must be 'scripted'/None, a callable fn(blue_obs) -> action, "
                    "or an object with an act(blue_obs) method")


class AirCombatVecEnv(VecEnv):
    """``num_envs`` red-vs-blue air-combat duels as tensors on ``device``; see the module docstring."""

    def __init__(self, num_envs: int, device: str | torch.device = "cpu", seed: int | None = None,
                 time_scale: float = 1.0, max_time_s: float = 300.0, opponent: Any = "scripted",
                 action_type: str = "discrete", reward_modules: Sequence[Any] = (),
                 scripted_evade_range_m: float = SCRIPTED_EVADE_RANGE_M) -> None:
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        if not time_scale > 0:
            raise ValueError(f"time_scale must be > 0, got {time_scale}")
        if action_type not in ("discrete", "continuous"):
            raise ValueError(f"action_type must be 'discrete' or 'continuous', got {action_type!r}")
        self.num_envs = n = int(num_envs)
        self.device = dev = torch.device(device)
        self.time_scale = float(time_scale)
        self.dt = DT_BASE * self.time_scale
        self.substeps = max(1, math.ceil(self.dt / MAX_SUBSTEP_S - 1e-9))
        self.sub_dt = self.dt / self.substeps
        self.max_time_s = float(max_time_s)
        self.max_steps = max(1, round(self.max_time_s / self.dt))
        self.scripted_evade_range_m = float(scripted_evade_range_m)
        self._opponent_fn: Opponent | None = None
        self.opponent: Any = "scripted"
        self.set_opponent(opponent)
        self.action_type = action_type
        self.reward_modules = build_reward_modules(reward_modules)
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
        # All float32: flags (alive, in flight) are 0/1 and counts (missiles left) small integers,
        # so that the per-step math is plain float arithmetic (bool ops and float<->bool casts are
        # several times slower than float ones on CPU).
        self._A = torch.zeros(_A_FIELDS, 2, n, **f32)
        self._M = torch.zeros(_M_FIELDS, 2, m, n, **f32)
        self._script_cooldown = torch.zeros(n, **f32)      # scripted opponent's own interval
        self._steps = torch.zeros(n, dtype=torch.int64, device=dev)
        # Preallocated scratch, and views of the state and of the scratch built once (state and
        # scratch are only ever updated in place).
        self._a = self._A.unbind(0)                                   # aircraft rows [2, N]
        self._m = self._M.unbind(0)                                   # missile rows [2, 6, N]
        self._xy, self._vxy = self._A[_AX:_AY + 1], self._A[_AVX:_AVY + 1]
        self._mxy, self._mcs = self._M[_MX:_MY + 1], self._M[_MC:_MS + 1]   # [2, 2, 6, N]
        self._swap = torch.tensor([1, 0], device=dev)
        self._target = torch.empty(5, 2, n, **f32)                   # x, y, vx, vy, alive of side 1 - s
        self._target_xy = self._target[0:2].unsqueeze(2)             # [2, 2, 1, N]
        self._target_vxy = self._target[2:4].unsqueeze(2)
        self._target_alive = self._target[4].unsqueeze(1)            # [2, 1, N]
        self._atmp = torch.empty(6, 2, n, **f32).unbind(0)
        mtmp = torch.empty(9, 2, m, n, **f32)
        self._rxy, self._vrxy = mtmp[0:2], mtmp[2:4]                 # [2, 2, 6, N]
        self._mtmp = mtmp.unbind(0)
        self._hit_any = torch.empty(2, n, **f32)
        self._fire = torch.zeros(2, n, **f32)
        self._can = torch.empty(2, n, **f32)
        self._stmp = torch.empty(5, n, **f32).unbind(0)
        self._dxy = torch.empty(2, n, **f32)
        self._evade_dxy = torch.empty(2, m, n, **f32)
        self._evade_r2 = torch.empty(m, n, **f32)
        # Per-side views: (rudder, throttle, fire command) rows written by the controllers, and
        # what the scripted opponent reads.
        a = self._a
        self._controls = [(a[_ARUD][s], a[_ATHR][s], self._fire[s]) for s in (RED, BLUE)]
        self._red_xy, self._blue_xy = self._xy[:, RED], self._xy[:, BLUE]
        self._blue_xy6 = self._blue_xy.unsqueeze(1)
        self._blue_cos, self._blue_sin = a[_ACOS][BLUE], a[_ASIN][BLUE]
        self._red_mxy, self._red_mactive = self._mxy[:, RED], self._m[_MACT][RED]
        self._target_src = self._A[:5]
        self._one, self._zero, self._g2, self._neg_g2 = (torch.tensor(v, **f32) for v in (1.0, 0.0, G * G, -G * G))
        self._eye = torch.eye(OBS_DIM, **f32)
        self._obs_head_scale = torch.tensor(_OBS_HEAD_SCALE, **f32).view(5, 1, 1)
        self._plans: dict[tuple[bool, int], ObsPlan] = {}
        # Launch: the missile fields x, y, active, speed, cos, sin come from these aircraft rows;
        # flat missile index of slot (6 - left) of (side, env) = _slot_base[side * N + env] - left * N.
        self._launch_rows = torch.tensor([_AX, _AY, _AALIVE, _ASPEED, _ACOS, _ASIN], device=dev)
        side = torch.arange(2 * n, device=dev).div(n, rounding_mode="floor")
        self._slot_base = (side * m + m) * n + torch.arange(2 * n, device=dev) % n
        # Reset: u ~ U[0, 1)^6 -> range, bearing, heading offsets (red, blue), speeds (red, blue).
        self._reset_offset = torch.tensor([START_RANGE_M[0], -math.pi, -START_HEADING_OFF_RAD,
                                           -START_HEADING_OFF_RAD, START_SPEED_MS[0], START_SPEED_MS[0]], **f32)
        self._reset_scale = torch.tensor([START_RANGE_M[1] - START_RANGE_M[0], 2 * math.pi,
                                          2 * START_HEADING_OFF_RAD, 2 * START_HEADING_OFF_RAD,
                                          START_SPEED_MS[1] - START_SPEED_MS[0],
                                          START_SPEED_MS[1] - START_SPEED_MS[0]], **f32)
        self._fresh_template = torch.zeros(_A_FIELDS, 2, 1, **f32)
        self._fresh_template[_ATHR] = START_THROTTLE
        self._fresh_template[_AALIVE] = 1.0
        self._fresh_template[_ALEFT] = MISSILES_PER_SIDE
        # Step outcome from key = 2 * red_alive + blue_alive + 4 * truncated.
        self._outcome_table = torch.tensor([OUTCOME_DRAW, OUTCOME_LOSS, OUTCOME_WIN, OUTCOME_RUNNING,
                                            OUTCOME_DRAW, OUTCOME_LOSS, OUTCOME_WIN, OUTCOME_TIMEOUT],
                                           dtype=torch.int8, device=dev)
        self._terminated_table = torch.tensor([True, True, True, False] * 2, device=dev)
        self._win_table = torch.tensor([False, False, True, False] * 2, device=dev)
        # Discrete action -> rudder, throttle, fire.
        self._rudder_table = torch.tensor([RUDDER_LEVELS[(a % 6) // 2] for a in range(N_DISCRETE_ACTIONS)], **f32)
        self._throttle_table = torch.tensor([THROTTLE_LEVELS[a % 2] for a in range(N_DISCRETE_ACTIONS)], **f32)
        self._fire_table = torch.tensor([float(a >= 6) for a in range(N_DISCRETE_ACTIONS)], **f32)
        self._last_obs: Obs | None = None
        self._blue_obs: Obs | None = None
        self._needs_reset = True
        self.launch_log: Any = None  # an rl_system.envs.air_combat.launches.LaunchLog while one records

    # ------------------------------------------------------------------ public API

    def set_opponent(self, opponent: Any) -> None:
        """Plug in blue's controller: ``"scripted"`` or ``None`` (the built-in pursuit), a callable
        ``fn(blue_obs) -> action`` or an object with ``act(blue_obs) -> action`` (e.g. a frozen
        policy snapshot for self-play). ``blue_obs`` is blue's observation dict from the same
        (mirrored) function as red's, ``"action_mask"`` included for discrete actions; the action
        is in this env's action format (``[N]`` int64 or ``[N, 3]`` float32). It is called under
        ``torch.no_grad()`` once per step, before both sides advance in the same batched step.
        Takes effect from the next ``step``."""
        self._opponent_fn = _as_opponent(opponent)
        self.opponent = "scripted" if self._opponent_fn is None else opponent
        self._blue_obs = None

    def reset(self, seed: int | None = None) -> Obs:
        """Reset all envs; ``seed`` reseeds the generator (else it continues its stream)."""
        if seed is not None:
            self._generator.manual_seed(seed)
        self._reset_envs(torch.arange(self.num_envs, device=self.device))
        self._needs_reset = False
        obs, self._blue_obs = self._observe_all(self._opponent_fn is not None)
        self._last_obs = obs
        return obs

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Everything needed to continue exactly; aircraft entries ``[N, 2]`` (side), missile
        entries ``[N, 2, 6]`` (side, slot), ``alive``/``m_active`` bool, ``left``/``steps`` int64."""
        A, M, dense = self._A, self._M, torch.contiguous_format
        state = {name: A[row].t().clone(memory_format=dense) for name, row in self._A_KEYS.items()}
        state["alive"] = (A[_AALIVE].t() > 0.5).contiguous()
        state["left"] = A[_ALEFT].t().to(torch.int64, memory_format=dense)
        state.update({name: M[row].permute(2, 0, 1).clone(memory_format=dense) for name, row in self._M_KEYS.items()})
        state["m_active"] = (M[_MACT].permute(2, 0, 1) > 0.5).contiguous()
        state["script_cooldown"] = self._script_cooldown.clone()
        state["steps"] = self._steps.clone()
        state["generator"] = self._generator.get_state()
        return state

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        """Load a :meth:`state_dict`. A state without ``m_cos``/``m_sin`` (older versions, or one
        that sets the missile heading) takes them from ``m_heading`` (rad)."""
        A, M = self._A, self._M
        for name, row in self._A_KEYS.items():
            A[row].copy_(state[name].t())
        A[_AALIVE].copy_(state["alive"].t())
        A[_ALEFT].copy_(state["left"].t())
        for name, row in self._M_KEYS.items():
            if name in state:
                M[row].copy_(state[name].permute(1, 2, 0))
        if "m_cos" not in state:
            heading = state["m_heading"].permute(1, 2, 0)
            torch.cos(heading, out=M[_MC])
            torch.sin(heading, out=M[_MS])
        M[_MACT].copy_(state["m_active"].permute(1, 2, 0))
        self._script_cooldown.copy_(state["script_cooldown"])
        self._steps.copy_(state["steps"])
        self._generator.set_state(state["generator"])
        self._derive_aircraft()
        self._needs_reset = False
        self._last_obs, self._blue_obs = self._observe_all(self._opponent_fn is not None)

    def observe(self, side: int, rows: torch.Tensor | None = None) -> Obs:
        """The observation dict of ``side`` (0 red, 1 blue); blue's is red's mirrored. With
        ``rows`` (int64 env indices) only those envs' observations, ``[len(rows), ...]``."""
        if rows is None:
            red, blue = self._observe_all(side != RED)
        else:
            red, blue = ObsPlan(self._A[:, :, rows], self._M[..., rows], side != RED).build(
                self._obs_head_scale, self._eye, self.discrete)
        return red if side == RED else blue

    # ------------------------------------------------------------------ analysis tools

    _VIEW_ROWS = {"x": _AX, "y": _AY, "vx": _AVX, "vy": _AVY, "alive": _AALIVE, "speed": _ASPEED,
                  "heading": _AHEAD, "heading_cos": _ACOS, "heading_sin": _ASIN}
    _MISSILE_VIEW_ROWS = {"m_x": _MX, "m_y": _MY, "m_active": _MACT, "m_speed": _MV, "m_cos": _MC,
                          "m_sin": _MS, "m_tof": _MTOF}

    def views(self) -> dict[str, torch.Tensor]:
        """Live views of the whole batch's state for analysis tools (the launch envelope, the
        launch log), no copies: aircraft ``x``, ``y`` (m), ``vx``, ``vy``, ``speed`` (m/s),
        ``heading`` (rad), ``heading_cos``, ``heading_sin``, ``alive`` (0/1) float32 ``[2, N]``
        (side); missiles ``m_x``, ``m_y``, ``m_speed``, ``m_cos``, ``m_sin``, ``m_tof`` (s),
        ``m_active`` (0/1) float32 ``[2, 6, N]`` (launching side, slot). Read only: the env
        updates them in place, and writing to them corrupts it."""
        out = {name: self._a[row] for name, row in self._VIEW_ROWS.items()}
        out.update({name: self._m[row] for name, row in self._MISSILE_VIEW_ROWS.items()})
        return out

    def advance(self, rudder: torch.Tensor, throttle: torch.Tensor, fire: torch.Tensor | None = None,
                scripted: torch.Tensor | None = None, on_substep: Callable[[Any], None] | None = None) -> None:
        """One step of the training physics (``dt`` of sim time in ``substeps`` sub-steps, the
        same integrator as :meth:`step`) under given controls, with no opponent policy, rewards,
        step count, truncation or auto-reset: what analysis tools fly (a destroyed aircraft
        stays destroyed). ``rudder`` ``[-1, 1]`` and ``throttle`` ``[0, 1]``: float ``[2, N]``
        (side); ``fire``: ``[2, N]`` launch commands (0/1), subject to the fire rule;
        ``scripted``: bool ``[N]``, envs whose blue flies the scripted opponent's manoeuvre
        (pursuit, turning tail on a close red missile) instead of the given controls; it never
        fires here. ``on_substep(env)`` is called after every sub-step."""
        a = self._a
        can = self._can_fire()
        if scripted is not None:
            can[BLUE].zero_()
            self._scripted_action(can)
            rudder, throttle = rudder.clone(), throttle.clone()
            rudder[BLUE] = torch.where(scripted, a[_ARUD][BLUE], rudder[BLUE])
            throttle[BLUE] = torch.where(scripted, a[_ATHR][BLUE], throttle[BLUE])
        a[_ARUD].copy_(rudder).clamp_(-1.0, 1.0)
        a[_ATHR].copy_(throttle).clamp_(0.0, 1.0)
        if fire is not None:
            self._fire.copy_(fire).mul_(can)
            self._launch(self._fire)
        for _ in range(self.substeps):
            self._substep(self.sub_dt)
            if on_substep is not None:
                on_substep(self)
        a[_ACOOL].sub_(self.dt).clamp_min_(0.0)
        self._script_cooldown.sub_(self.dt).clamp_min_(0.0)

    def step(self, action: torch.Tensor) -> StepResult:
        action = self._step_action(action)
        a, fire = self._a, self._fire
        can = self._can_fire()
        self._decode(action, RED)
        if self._opponent_fn is None:
            self._scripted_action(can)
        else:
            if self._blue_obs is None:
                self._blue_obs = self._observe_all(True)[1]
            with torch.no_grad():
                blue_action = self._opponent_fn(self._blue_obs)
            blue_action = torch.as_tensor(blue_action, device=self.device)
            self._decode(check_action(blue_action, self.action_spec, self.num_envs, self.device), BLUE)
        fire.mul_(can)                                                   # illegal commands ignored
        self._launch(fire)

        for _ in range(self.substeps):
            self._substep(self.sub_dt)
        a[_ACOOL].sub_(self.dt).clamp_min_(0.0)
        self._script_cooldown.sub_(self.dt).clamp_min_(0.0)
        self._steps.add_(1)

        red_alive, blue_alive = a[_AALIVE]
        truncated = self._steps >= self.max_steps
        key = torch.add(blue_alive, red_alive, alpha=2.0).add_(truncated, alpha=4.0).long()
        outcome = self._outcome_table.index_select(0, key)
        terminated = self._terminated_table.index_select(0, key)
        win = self._win_table.index_select(0, key)
        done = terminated | truncated
        reward = red_alive - blue_alive                                  # +1 win, -1 loss, else 0
        info = {"outcome": outcome, "win": win}

        two_sided = self._opponent_fn is not None
        final_obs, blue_obs = self._observe_all(two_sided)
        for module in self.reward_modules:
            reward += module.compute(self._last_obs, final_obs, action, done, info).to(reward.dtype)
        idx = done.nonzero().squeeze(1)
        obs = final_obs
        if idx.numel():
            self._notify_autoreset(idx)
            self._reset_envs(idx)
            fresh, fresh_blue = self._observe_fresh(idx, two_sided)
            obs = {k: v.index_copy(0, idx, fresh[k]) for k, v in final_obs.items()}
            if two_sided:
                blue_obs = {k: v.index_copy_(0, idx, fresh_blue[k]) for k, v in blue_obs.items()}
        self._last_obs = obs
        self._blue_obs = blue_obs
        return StepResult(obs, reward, terminated, truncated, final_obs, info)

    # ------------------------------------------------------------------ read-only views

    def render_state(self, env_index: int = 0) -> dict[str, torch.Tensor]:
        """What a renderer draws of env ``env_index``, as fresh CPU tensors (side 0 red, 1 blue;
        metres): aircraft positions ``x``, ``y`` float32 ``[2]`` and ``alive`` bool ``[2]``;
        missile positions ``m_x``, ``m_y`` float32 ``[2, 6]`` (launching side, slot) and
        ``m_active`` bool ``[2, 6]`` (in flight). Sim seconds per step: :attr:`dt`."""
        a = self._A[:, :, env_index].to("cpu", copy=True)               # [fields, 2]
        m = self._M[..., env_index].to("cpu", copy=True)                # [fields, 2, 6]
        return {"x": a[_AX], "y": a[_AY], "alive": a[_AALIVE] > 0.5,
                "m_x": m[_MX], "m_y": m[_MY], "m_active": m[_MACT] > 0.5}

    # The state in the layout of the state dict (aircraft [N, 2], missiles [N, 2, 6]); the float
    # ones are views of the live state, the others copies. For tests and benchmarks.

    _A_KEYS = {"x": _AX, "y": _AY, "speed": _ASPEED, "heading": _AHEAD, "throttle": _ATHR,
               "rudder": _ARUD, "cooldown": _ACOOL}
    _M_KEYS = {"m_x": _MX, "m_y": _MY, "m_speed": _MV, "m_cos": _MC, "m_sin": _MS, "m_tof": _MTOF}

    _x = property(lambda self: self._A[_AX].t())
    _y = property(lambda self: self._A[_AY].t())
    _speed = property(lambda self: self._A[_ASPEED].t())
    _heading = property(lambda self: self._A[_AHEAD].t())
    _throttle = property(lambda self: self._A[_ATHR].t())
    _cooldown = property(lambda self: self._A[_ACOOL].t())
    _alive = property(lambda self: self._A[_AALIVE].t() > 0.5)
    _left = property(lambda self: self._A[_ALEFT].t().long())
    _m_x = property(lambda self: self._M[_MX].permute(2, 0, 1))
    _m_y = property(lambda self: self._M[_MY].permute(2, 0, 1))
    _m_speed = property(lambda self: self._M[_MV].permute(2, 0, 1))
    _m_tof = property(lambda self: self._M[_MTOF].permute(2, 0, 1))
    _m_cos = property(lambda self: self._M[_MC].permute(2, 0, 1))
    _m_sin = property(lambda self: self._M[_MS].permute(2, 0, 1))
    _m_heading = property(lambda self: torch.atan2(self._M[_MS], self._M[_MC]).permute(2, 0, 1))
    _m_active = property(lambda self: self._M[_MACT].permute(2, 0, 1) > 0.5)

    # ------------------------------------------------------------------ internals

    def _observe_all(self, both: bool) -> tuple[Obs, Obs | None]:
        plan = self._plans.get((both, 0))
        if plan is None:
            plan = self._plans[(both, 0)] = ObsPlan(self._A, self._M, both)
        return plan.build(self._obs_head_scale, self._eye, self.discrete)

    def _observe_fresh(self, idx: torch.Tensor, both: bool) -> tuple[Obs, Obs | None]:
        """Observations of the just-reset envs ``idx``: gathered into a cached buffer of the next
        power-of-two size (padded with repeats), so that few plans serve every count."""
        k = idx.numel()
        size = 1 << (k - 1).bit_length()
        plan = self._plans.get((both, size))
        if plan is None:
            buf = torch.empty(_A_FIELDS, 2, size, dtype=torch.float32, device=self.device)
            plan = self._plans[(both, size)] = ObsPlan(buf, None, both, fresh=True)
        if size > k:
            idx = torch.cat((idx, idx[:1].expand(size - k)))
        torch.index_select(self._A, 2, idx, out=plan.A)
        red, blue = plan.build(self._obs_head_scale, self._eye, self.discrete)
        red = {key: v[:k] for key, v in red.items()}
        return red, (None if blue is None else {key: v[:k] for key, v in blue.items()})

    def _can_fire(self) -> torch.Tensor:
        """[2, N] float 0/1: alive, missiles left and launch cooldown over."""
        a, ok = self._a, self._can
        torch.gt(a[_ALEFT], 0.5, out=ok).mul_(a[_AALIVE])
        return ok.mul_(torch.le(a[_ACOOL], 0.0, out=self._hit_any))

    def _decode(self, action: torch.Tensor, side: int) -> None:
        """Write ``side``'s rudder and throttle into the state and its fire command into ``_fire``;
        ``action`` has passed :func:`check_action` (``[N]`` int64 or ``[N, 3]`` float32)."""
        rudder, throttle, fire = self._controls[side]
        if self.discrete:
            torch.index_select(self._rudder_table, 0, action, out=rudder)
            torch.index_select(self._throttle_table, 0, action, out=throttle)
            torch.index_select(self._fire_table, 0, action, out=fire)
            return
        torch.clamp(action[:, 0], -1.0, 1.0, out=rudder)
        torch.clamp(action[:, 1], 0.0, 1.0, out=throttle)
        torch.gt(action[:, 2], 0.5, out=fire)

    def _scripted_action(self, can: torch.Tensor) -> None:
        """Blue's batched scripted policy, straight from the state: rudder, throttle and fire
        command (``can``: the fire rule, [2, N])."""
        rudder, throttle, fire = self._controls[BLUE]
        bx, by, bearing, ok, tmp = self._stmp
        dx, dy = torch.sub(self._red_xy, self._blue_xy, out=self._dxy)
        cos_h, sin_h = self._blue_cos, self._blue_sin
        # Red's bearing off blue's nose: atan2 of red's offset rotated into blue's frame.
        torch.mul(dx, cos_h, out=bx).addcmul_(dy, sin_h)
        torch.mul(dy, cos_h, out=by).addcmul_(dx, sin_h, value=-1.0)
        torch.atan2(by, bx, out=bearing)
        # Fire: red in range and on the nose, own interval over, fire rule.
        r2 = bx.mul_(bx).addcmul_(by, by)
        torch.lt(r2, SCRIPTED_FIRE_RANGE_M ** 2, out=fire)
        fire.mul_(torch.lt(torch.abs(bearing, out=ok), SCRIPTED_FIRE_CONE_RAD, out=ok))
        fire.mul_(torch.le(self._script_cooldown, 0.0, out=ok)).mul_(can[BLUE])
        self._script_cooldown.add_(fire, alpha=SCRIPTED_FIRE_INTERVAL_S)  # it was 0 where fire
        command = bearing                                                # pursuit: turn toward red
        if self.scripted_evade_range_m > 0:
            # Evasion: while a red missile in flight is within the evade range, turn tail on red
            # (and so, roughly, on its missiles): command bearing - pi * sign(bearing).
            mdx, mdy = torch.sub(self._red_mxy, self._blue_xy6, out=self._evade_dxy)
            close = torch.mul(mdx, mdx, out=self._evade_r2).addcmul_(mdy, mdy)
            torch.lt(close, self.scripted_evade_range_m ** 2, out=close).mul_(self._red_mactive)
            threat = torch.amax(close, dim=0, out=ok)
            command = bearing.addcmul_(torch.sign(bearing, out=tmp), threat, value=-math.pi)
        torch.mul(command, SCRIPTED_TURN_GAIN, out=rudder).clamp_(-1.0, 1.0)
        throttle.fill_(1.0)

    def _launch(self, fire: torch.Tensor) -> None:
        """Launch the next free slot of every side where ``fire`` ([2, N] float 0/1, already
        legal). Index-based: only the launching (side, env) pairs are touched."""
        n = self.num_envs
        flat = fire.view(-1).nonzero().squeeze(1)                         # side * N + env
        if flat.numel() == 0:
            return
        src = self._A.view(_A_FIELDS, -1).index_select(1, flat)           # [fields, k]
        slot = torch.sub(self._slot_base.index_select(0, flat), src[_ALEFT].long(), alpha=n)
        if self.launch_log is not None:
            self.launch_log.on_launch(self, flat, slot)
        M = self._M.view(_M_FIELDS, -1)
        M[:_MTOF].index_copy_(1, slot, src.index_select(0, self._launch_rows))  # x, y, 1, v, cos, sin
        M[_MTOF].index_fill_(0, slot, 0.0)
        self._a[_ALEFT].sub_(fire)
        self._a[_ACOOL].add_(fire, alpha=FIRE_COOLDOWN_S)                  # it was 0 where fire

    def _derive_aircraft(self) -> None:
        """Heading cos/sin and velocity from heading and speed, for the whole batch (one kernel over
        the same tensor every time, so the values are bit-identical however the state got here)."""
        a = self._a
        torch.cos(a[_AHEAD], out=a[_ACOS])
        torch.sin(a[_AHEAD], out=a[_ASIN])
        torch.mul(a[_ASPEED], a[_ACOS], out=a[_AVX])
        torch.mul(a[_ASPEED], a[_ASIN], out=a[_AVY])

    def _substep(self, dt: float) -> None:
        a = self._a
        # ---- aircraft [2, N]: lift-limited turn, thrust - (parasite + induced) drag.
        v, heading = a[_ASPEED], a[_AHEAD]
        v2, q_s, lim, neg_lim, omega, drag = self._atmp
        torch.mul(v, v, out=v2)
        torch.mul(v2, 0.5 * RHO * WING_AREA_M2, out=q_s)
        # turn_rate_limit(v): lift (q S Cl_max / m, 1 g of it holding the aircraft up), load limit.
        kappa = 0.5 * RHO * WING_AREA_M2 * CL_MAX / MASS_KG
        torch.addcmul(self._neg_g2, v2, v2, value=kappa * kappa, out=lim).clamp_min_(0.0).sqrt_()
        lim.clamp_max_(N_MAX_LATERAL * G).div_(v).clamp_max_(MAX_TURN_RATE)
        torch.mul(a[_ARUD], MAX_TURN_RATE, out=omega)
        torch.clamp(omega, min=torch.neg(lim, out=neg_lim), max=lim, out=omega)
        # Cl^2 = (m * hypot(g, a_lat) / qS)^2 ; drag/m = qS*CD0/m + K * m * (g^2 + a_lat^2) / qS
        a_lat = torch.mul(v, omega, out=v2)
        induced = torch.addcmul(self._g2, a_lat, a_lat, out=v2)
        torch.addcdiv(torch.mul(q_s, CD0 / MASS_KG, out=drag), induced, q_s, value=K_INDUCED * MASS_KG, out=drag)
        wrap_angle(heading.add_(omega, alpha=dt))
        v.add_(a[_ATHR], alpha=THRUST_N / MASS_KG * dt).sub_(drag, alpha=dt).clamp_(V_STALL, V_TERMINAL)
        self._derive_aircraft()
        self._xy.add_(self._vxy, alpha=dt)

        # ---- missiles [2, 6, N], all slots densely: slots not in flight advance with dt = 0
        # (every time step below is scaled by the 0/1 `active`), so they stay put and cannot hit.
        # The target of side s is the aircraft of side 1 - s, at its already-advanced position;
        # the hit test uses the distance at the start of the sub-step.
        torch.index_select(self._target_src, 1, self._swap, out=self._target)
        mx, my, active, mv, mc, ms, tof = self._m
        rx, ry, vrx, vry, r2, hit, t1, t2, t3 = self._mtmp
        torch.sub(self._target_xy, self._mxy, out=self._rxy)               # missile -> target
        torch.mul(rx, rx, out=r2).addcmul_(ry, ry)
        torch.lt(r2, MISSILE_HIT_RADIUS_M ** 2, out=hit).mul_(active).mul_(self._target_alive)
        # PN: lateral acceleration N * v * LOS rate, limited to MISSILE_MAX_G; heading rate = a / v.
        # LOS rate = (r x v_rel) / (|r|^2 + 1) with v_rel = target velocity - missile velocity.
        torch.addcmul(self._target_vxy, mv, self._mcs, value=-1.0, out=self._vrxy)
        los = torch.mul(rx, vry, out=t2).addcmul_(ry, vrx, value=-1.0).div_(r2.add_(1.0))
        a_lat = los.mul_(mv).clamp_(-MISSILE_MAX_G * G / PN_GAIN, MISSILE_MAX_G * G / PN_GAIN)  # a / N
        per_v = torch.addcdiv(self._zero, active, torch.clamp(mv, min=1.0, out=t1), value=PN_GAIN * dt, out=t1)
        turn = a_lat.mul_(per_v)                                         # rad this sub-step
        # Rotate (cos, sin) of the heading by `turn` (|turn| <= 30 g * dt / v, < 0.05 rad): Taylor
        # series of cos/sin to 4th/3rd order, error < 1e-9 (below float32 resolution).
        k = torch.mul(turn, turn, out=t1)
        cos_d = torch.addcmul(self._one, torch.sub(k, 12.0, out=r2), k, value=1.0 / 24.0, out=r2)  # 1 - k/2 + k^2/24
        sin_d = torch.addcmul(turn, turn, k, value=-1.0 / 6.0, out=t3)  # turn - turn^3/6
        new_c = torch.mul(mc, cos_d, out=t1).addcmul_(ms, sin_d, value=-1.0)
        ms.mul_(cos_d).addcmul_(mc, sin_d)
        mc.copy_(new_c)
        # Speed: motor thrust while tof < burn time, drag K v^2; then move along the new heading.
        burning = torch.lt(tof, MISSILE_BURN_S, out=t2)
        acc = torch.mul(burning, MISSILE_THRUST_ACCEL, out=t1).addcmul_(mv, mv, value=-MISSILE_DRAG_K)
        mv.addcmul_(acc, active, value=dt).clamp_min_(0.0)
        step_len = torch.mul(mv, active, out=t1)
        self._mxy.addcmul_(self._mcs, step_len, value=dt)
        tof.add_(active, alpha=dt)
        # Self-destruct: slow after burn-out (a burning missile's speed is offset out of the test),
        # or too old; a hit missile is gone too (hit implies active, so subtracting clears it).
        keep = torch.add(mv, burning, alpha=_BURN_OFFSET, out=t1)
        torch.ge(keep, MISSILE_MIN_SPEED, out=keep).mul_(torch.le(tof, MISSILE_MAX_TOF_S, out=t3))
        active.sub_(hit).mul_(keep)
        # Hit targets are destroyed: side s's hits land on side 1 - s (it was alive: 1 - 1 = 0).
        torch.amax(hit, dim=1, out=self._hit_any)
        a[_AALIVE].sub_(self._hit_any.index_select(0, self._swap))
        if self.launch_log is not None:
            self.launch_log.on_substep(self, hit)

    def _reset_envs(self, idx: torch.Tensor) -> None:
        if self.launch_log is not None:
            self.launch_log.on_reset(idx)
        k = idx.numel()
        u = torch.rand(k, 6, generator=self._generator, device=self.device)
        rng, theta, off, speed = torch.addcmul(self._reset_offset, u, self._reset_scale).t().split((1, 1, 2, 2))
        fresh = self._fresh_template.expand(_A_FIELDS, 2, k).contiguous()
        torch.mul(torch.cos(theta), rng, out=fresh[_AX, BLUE:])           # red at the origin
        torch.mul(torch.sin(theta), rng, out=fresh[_AY, BLUE:])
        fresh[_ASPEED] = speed
        heading = torch.add(off, theta, out=fresh[_AHEAD])                # each toward the other
        heading[BLUE].add_(math.pi)
        wrap_angle(heading)
        self._A.index_copy_(2, idx, fresh)
        self._derive_aircraft()
        self._M.index_fill_(3, idx, 0.0)
        self._script_cooldown.index_fill_(0, idx, 0.0)
        self._steps.index_fill_(0, idx, 0)
