"""The missile's launch envelope, from one batch of shots: ``rl-system air-combat range-map``.

Every env of one :class:`~rl_system.envs.air_combat.AirCombatVecEnv` batch is one shot: red at the origin
heading along +x fires one missile at t = 0 at blue, which is on red's nose at the cell's launch
range, its heading set by the cell's **target aspect** (the angle between blue's heading and the
line from blue to red: 0° hot, nose on the shooter; 90° beam; 180° cold, tail to the shooter).
From the launch blue flies one **manoeuvre**:

* ``straight``: holds its heading at full throttle (the non-manoeuvring target);
* ``beam``: turns to fly at right angles to the incoming missile and holds it (notching);
* ``cold``: turns its tail on the missile at once and runs at full throttle;
* ``scripted``: the training opponent's own rule (pursue red, turn tail while a red missile is
  within its evade range), so the envelope is the one a policy meets in training.

Turns use the scripted opponent's rudder law (rudder ``∝`` heading error, clipped), limited by
the aircraft's lift and load like every turn in the env. Each cell holds ``samples`` shots whose
shooter and target speeds are drawn from the given ranges (default: the episodes' start speeds),
so its hit probability is a fraction of real shots, not a threshold. The batch is stepped by
:meth:`~rl_system.envs.air_combat.AirCombatVecEnv.advance`, the training step's integrator at the same
``time_scale``, until every missile has hit or died; per-sub-step tracking gives the time of
flight, the closing speed at impact and the miss distance. There is no per-shot Python loop.

Derived per aspect: the **maximum range** ``R_max`` (the far edge of the hit region against the
non-manoeuvring target) and the **no-escape range** ``R_ne`` (the far edge against a target that
turns cold at launch), both where the hit probability crosses 0.5 (linear between grid ranges).
The 2D model has no altitude (the air density is fixed), so there is no altitude axis.

:func:`sweep` returns a :class:`Envelope`; :mod:`rl_system.envs.air_combat.envelope_plot` draws it.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

import torch

from rl_system.envs.air_combat.env import AirCombatVecEnv
from rl_system.envs.air_combat.physics import (
    MISSILE_MAX_TOF_S,
    SCRIPTED_TURN_GAIN,
    START_SPEED_MS,
    V_STALL,
    V_TERMINAL,
    wrap_angle,
)
from rl_system.envs.air_combat.spec import BLUE, RED

MANOEUVRES = ("straight", "beam", "cold", "scripted")
_STRAIGHT, _BEAM, _COLD, _SCRIPTED = range(4)
DEFAULT_ENV_KWARGS = {"time_scale": 16.0}  # the shipped preset's time step (launch/configs/air_combat_ppo.yaml)
MAX_SHOTS = 400_000          # envs in one sweep (memory: ~1.5 kB of state and scratch per env)
REACH_TARGET_RANGE_M = 500_000.0  # the reach shot's target: far beyond any missile's reach


class EnvelopeError(ValueError):
    """Sweep parameters that make no sweep; one line."""


@dataclass(frozen=True)
class SweepSpec:
    """The grid of a sweep. Ranges in km, aspects in degrees (0 hot .. 180 cold), speeds in m/s
    (``(low, high)``, drawn uniformly per shot), ``env_kwargs`` for the env (``time_scale``,
    ``scripted_evade_range_m``; the rest is ignored by the physics)."""

    ranges_km: tuple[float, ...] = tuple(float(r) for r in range(2, 62, 2))
    aspects_deg: tuple[float, ...] = tuple(float(a) for a in range(0, 181, 15))
    manoeuvres: tuple[str, ...] = MANOEUVRES
    samples: int = 6
    shooter_speed: tuple[float, float] = START_SPEED_MS
    target_speed: tuple[float, float] = START_SPEED_MS
    seed: int = 0
    env_kwargs: dict[str, Any] = field(default_factory=lambda: dict(DEFAULT_ENV_KWARGS))
    trace_aspects_deg: tuple[float, ...] = (0.0, 90.0, 180.0)

    def check(self) -> None:
        """Raise :class:`EnvelopeError` for a grid that cannot be swept."""
        if not self.ranges_km or min(self.ranges_km) <= 0:
            raise EnvelopeError("launch ranges must be positive km")
        if sorted(set(self.ranges_km)) != list(self.ranges_km):
            raise EnvelopeError("launch ranges must increase")
        if not self.aspects_deg or not all(0.0 <= a <= 180.0 for a in self.aspects_deg):
            raise EnvelopeError("target aspects must lie in [0, 180] degrees")
        if sorted(set(self.aspects_deg)) != list(self.aspects_deg):
            raise EnvelopeError("target aspects must increase")
        unknown = [m for m in self.manoeuvres if m not in MANOEUVRES]
        if unknown or not self.manoeuvres:
            raise EnvelopeError(f"unknown manoeuvre {unknown[0] if unknown else '(none)'!r}; "
                                f"choose from {', '.join(MANOEUVRES)}")
        if self.samples < 1:
            raise EnvelopeError("samples per cell must be >= 1")
        for name, (lo, hi) in (("shooter", self.shooter_speed), ("target", self.target_speed)):
            if not V_STALL <= lo <= hi <= V_TERMINAL:
                raise EnvelopeError(f"{name} speed {lo:g}..{hi:g} m/s must lie within the aircraft's "
                                    f"{V_STALL:.0f}..{V_TERMINAL:.0f} m/s")
        if self.shots > MAX_SHOTS:
            raise EnvelopeError(f"{self.shots:,} shots in one batch; at most {MAX_SHOTS:,} (fewer ranges, aspects "
                                f"or samples)")

    @property
    def shots(self) -> int:
        return len(self.manoeuvres) * len(self.aspects_deg) * len(self.ranges_km) * self.samples


@dataclass
class Envelope:
    """A sweep's result. Per-cell tensors are ``[manoeuvre, aspect, range]`` float64:
    ``p_hit``, and over the cell's hits ``tof_s`` (time of flight) and ``closing_ms`` (closing
    speed at impact), over its misses ``miss_m`` (closest approach); NaN where a cell has none.
    ``edge_km`` ``[manoeuvre, aspect]``: the far edge of the hit region (p crosses 0.5; NaN if
    the nearest range already misses, the last range if nothing farther misses). ``traces``: for
    the space-time diagram, per traced shot its ``manoeuvre``, ``aspect_deg``, ``range_km``,
    ``hit`` and the distances from the launch point per step, ``missile_km``/``target_km``
    ``[T]`` (NaN once the missile is gone), sampled every ``dt`` s; ``reach_km`` ``[T]``: a
    missile fired straight at nothing (its kinematic reach over time)."""

    spec: SweepSpec
    p_hit: torch.Tensor
    tof_s: torch.Tensor
    closing_ms: torch.Tensor
    miss_m: torch.Tensor
    edge_km: torch.Tensor
    dt: float
    substeps: int
    reach_km: torch.Tensor
    traces: list[dict[str, Any]]
    wall_s: float
    sim_steps: int

    def edge(self, manoeuvre: str) -> torch.Tensor:
        """``[aspect]`` far edge (km) of the hit region against ``manoeuvre``."""
        return self.edge_km[self.spec.manoeuvres.index(manoeuvre)]

    @property
    def r_max_km(self) -> torch.Tensor | None:
        """``[aspect]`` maximum range: the edge against the non-manoeuvring target."""
        return self.edge("straight") if "straight" in self.spec.manoeuvres else None

    @property
    def r_no_escape_km(self) -> torch.Tensor | None:
        """``[aspect]`` no-escape range: the edge against a target turning cold at launch."""
        return self.edge("cold") if "cold" in self.spec.manoeuvres else None

    def to_json(self) -> dict[str, Any]:
        """The table: the parameters, every cell, the edges per manoeuvre, and the timing."""
        s = self.spec

        def num(v: float) -> float | None:
            return None if math.isnan(v) else round(v, 4)

        cells = [{"manoeuvre": m, "aspect_deg": a, "range_km": r, "p_hit": num(float(self.p_hit[i, j, k])),
                  "tof_s": num(float(self.tof_s[i, j, k])), "closing_ms": num(float(self.closing_ms[i, j, k])),
                  "miss_m": num(float(self.miss_m[i, j, k]))}
                 for i, m in enumerate(s.manoeuvres) for j, a in enumerate(s.aspects_deg)
                 for k, r in enumerate(s.ranges_km)]
        return {"params": {"ranges_km": list(s.ranges_km), "aspects_deg": list(s.aspects_deg),
                           "manoeuvres": list(s.manoeuvres), "samples": s.samples,
                           "shooter_speed_ms": list(s.shooter_speed), "target_speed_ms": list(s.target_speed),
                           "seed": s.seed, "env_kwargs": s.env_kwargs, "dt_s": self.dt, "substeps": self.substeps},
                "edges_km": {m: [num(float(v)) for v in self.edge_km[i]] for i, m in enumerate(s.manoeuvres)},
                "kinematic_reach_km": num(float(torch.nan_to_num(self.reach_km, nan=0.0).max())),
                "cells": cells, "shots": s.shots, "sim_steps": self.sim_steps, "wall_s": round(self.wall_s, 3)}


def aspect_deg(target_xy: torch.Tensor, target_heading: torch.Tensor, shooter_xy: torch.Tensor) -> torch.Tensor:
    """Target aspect in degrees ``[0, 180]``: the angle between the target's heading and the line
    from the target to the shooter (0 hot, 180 cold). ``*_xy`` ``[2, K]``, heading ``[K]`` rad."""
    to_shooter = torch.atan2(shooter_xy[1] - target_xy[1], shooter_xy[0] - target_xy[0])
    return torch.rad2deg(wrap_angle(target_heading - to_shooter).abs())


def _edges(p: torch.Tensor, ranges: Sequence[float]) -> torch.Tensor:
    """``p [..., R]`` -> ``[...]``: where the first run of ``p >= 0.5`` (from the nearest range
    that hits) ends, interpolated linearly to the 0.5 crossing; NaN where no range hits."""
    ok = (p >= 0.5).numpy()
    out = torch.full(p.shape[:-1], float("nan"), dtype=torch.float64)
    for index in itertools.product(*map(range, p.shape[:-1])):
        row, hits = p[index], ok[index]
        if not hits.any():
            continue
        k = int(hits.argmax())
        while k + 1 < len(ranges) and hits[k + 1]:
            k += 1
        edge = ranges[k]
        if k + 1 < len(ranges):
            p0, p1 = float(row[k]), float(row[k + 1])
            edge += (ranges[k + 1] - ranges[k]) * (p0 - 0.5) / max(p0 - p1, 1e-9)
        out[index] = edge
    return out


class _Tracker:
    """Per-sub-step bookkeeping of red's missile (slot 0) in every env: closest approach and the
    last closing speed while in flight, and the space-time traces of a few envs."""

    def __init__(self, env: AirCombatVecEnv, trace_idx: torch.Tensor, max_steps: int) -> None:
        v = env.views()
        self.mx, self.my, self.mact = v["m_x"][RED, 0], v["m_y"][RED, 0], v["m_active"][RED, 0]
        self.mv, self.mc, self.ms = v["m_speed"][RED, 0], v["m_cos"][RED, 0], v["m_sin"][RED, 0]
        self.bx, self.by, self.bvx, self.bvy = v["x"][BLUE], v["y"][BLUE], v["vx"][BLUE], v["vy"][BLUE]
        n = env.num_envs
        self.was = self.mact.clone()                     # in flight at the start of the sub-step
        self.min_r = torch.full((n,), float("inf"))
        self.closing = torch.zeros(n)
        self.trace_idx = trace_idx
        self.missile = torch.full((max_steps + 1, trace_idx.numel()), float("nan"))
        self.target = torch.full_like(self.missile, float("nan"))

    def on_substep(self, env: AirCombatVecEnv) -> None:  # noqa: ARG002 - the views are bound already
        rx, ry = self.bx - self.mx, self.by - self.my
        r = torch.hypot(rx, ry)
        flying = self.was > 0.5
        torch.where(flying, torch.minimum(self.min_r, r), self.min_r, out=self.min_r)
        # closing speed = (missile velocity - target velocity) . unit vector missile -> target
        inv = r.clamp_min(1e-3).reciprocal()
        closing = ((self.mv * self.mc - self.bvx) * rx + (self.mv * self.ms - self.bvy) * ry) * inv
        torch.where(flying, closing, self.closing, out=self.closing)
        self.was.copy_(self.mact)

    def record(self, step: int) -> None:
        i = self.trace_idx
        flying = self.was.index_select(0, i) > 0.5
        dist = torch.hypot(self.mx.index_select(0, i), self.my.index_select(0, i)) / 1000.0
        self.missile[step] = torch.where(flying, dist, torch.nan)
        self.target[step] = torch.hypot(self.bx.index_select(0, i), self.by.index_select(0, i)) / 1000.0


def _blue_rudder(env: AirCombatVecEnv, kind: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """Blue's rudder ``[N]`` for the ``straight``/``beam``/``cold`` manoeuvres (``kind [N]``):
    steer by the scripted rudder law toward heading away from (cold) or across (beam) the line
    from red's missile (red itself once the missile is gone)."""
    v = env.views()
    flying = v["m_active"][RED, 0] > 0.5
    ref_x = torch.where(flying, v["m_x"][RED, 0], v["x"][RED])
    ref_y = torch.where(flying, v["m_y"][RED, 0], v["y"][RED])
    away = torch.atan2(v["y"][BLUE] - ref_y, v["x"][BLUE] - ref_x)
    heading = v["heading"][BLUE]
    cold_err = wrap_angle(away - heading)
    left, right = wrap_angle(away + math.pi / 2 - heading), wrap_angle(away - math.pi / 2 - heading)
    beam_err = torch.where(left.abs() <= right.abs(), left, right)
    err = torch.where(kind == _COLD, cold_err, torch.where(kind == _BEAM, beam_err, torch.zeros_like(heading)))
    return torch.mul(err, SCRIPTED_TURN_GAIN, out=out).clamp_(-1.0, 1.0)


def _start_state(env: AirCombatVecEnv, range_m: torch.Tensor, heading_blue: torch.Tensor,
                 speed_red: torch.Tensor, speed_blue: torch.Tensor) -> None:
    """Red at the origin heading +x, blue at ``(range, 0)``; full throttle, no missile in flight."""
    state = env.state_dict()
    zeros = torch.zeros_like(range_m)
    state["x"] = torch.stack((zeros, range_m), 1)
    state["y"] = torch.zeros(env.num_envs, 2)
    state["heading"] = torch.stack((zeros, heading_blue), 1)
    state["speed"] = torch.stack((speed_red, speed_blue), 1)
    state["throttle"] = torch.ones(env.num_envs, 2)
    state["rudder"] = torch.zeros(env.num_envs, 2)
    state["cooldown"] = torch.zeros(env.num_envs, 2)
    state["alive"] = torch.ones(env.num_envs, 2, dtype=torch.bool)
    state["m_active"] = torch.zeros_like(state["m_active"])
    env.load_state_dict(state)


def sweep(spec: SweepSpec) -> Envelope:
    """Fly every shot of ``spec`` in one batch (plus one reach shot) and tabulate the cells."""
    spec.check()
    t0 = time.perf_counter()
    M, A, R, S = len(spec.manoeuvres), len(spec.aspects_deg), len(spec.ranges_km), spec.samples
    n = spec.shots + 1                                   # the last env is the reach shot
    gen = torch.Generator().manual_seed(spec.seed)
    # Env index = ((m * A + a) * R + r) * S + s.
    grid = torch.cartesian_prod(torch.arange(M), torch.arange(A), torch.arange(R), torch.arange(S))
    kind = torch.tensor([MANOEUVRES.index(m) for m in spec.manoeuvres])[grid[:, 0]]
    aspect = torch.tensor(spec.aspects_deg, dtype=torch.float32)[grid[:, 1]]
    range_m = torch.tensor(spec.ranges_km, dtype=torch.float32)[grid[:, 2]] * 1000.0
    side = 1.0 - 2.0 * (grid[:, 3] % 2).float()          # half the shots mirrored: turns both ways
    lo_r, hi_r = spec.shooter_speed
    lo_b, hi_b = spec.target_speed
    speed_red = lo_r + (hi_r - lo_r) * torch.rand(n, generator=gen)
    speed_blue = lo_b + (hi_b - lo_b) * torch.rand(n, generator=gen)
    heading_blue = wrap_angle(math.pi + side * torch.deg2rad(aspect))
    # The reach shot: a straight, cold target far beyond any missile's reach.
    kind = torch.cat((kind, torch.tensor([_STRAIGHT])))
    range_m = torch.cat((range_m, torch.tensor([REACH_TARGET_RANGE_M])))
    heading_blue = torch.cat((heading_blue, torch.tensor([0.0])))
    speed_red[-1] = speed_blue[-1] = 0.5 * (START_SPEED_MS[0] + START_SPEED_MS[1])

    kwargs = {k: v for k, v in spec.env_kwargs.items() if k in ("time_scale", "scripted_evade_range_m")}
    env = AirCombatVecEnv(n, "cpu", seed=spec.seed, action_type="continuous", **kwargs)
    env.reset()
    _start_state(env, range_m, heading_blue, speed_red, speed_blue)
    max_steps = math.ceil((MISSILE_MAX_TOF_S + 1.0) / env.dt)
    tracker = _Tracker(env, torch.cat((_trace_index(spec, grid), torch.tensor([n - 1]))), max_steps)
    tracker.was.fill_(1.0)                               # every missile leaves at t = 0, in the first step
    tracker.record(0)
    scripted = kind == _SCRIPTED
    rudder, throttle = torch.zeros(2, n), torch.ones(2, n)
    fire = torch.zeros(2, n)
    fire[RED] = 1.0
    steps = 0
    for steps in range(1, max_steps + 1):
        _blue_rudder(env, kind, rudder[BLUE])
        env.advance(rudder, throttle, fire if steps == 1 else None, scripted=scripted,
                    on_substep=tracker.on_substep)
        tracker.record(steps)
        if steps % 8 == 0 and not bool(tracker.was.any()):
            break
    v = env.views()
    hit = (v["alive"][BLUE] < 0.5)[:-1].double()
    tof = v["m_tof"][RED, 0][:-1].double()
    closing, miss = tracker.closing[:-1].double(), tracker.min_r[:-1].double()
    env.close()

    def per_cell(values: torch.Tensor, where: torch.Tensor) -> torch.Tensor:
        w = where.view(M, A, R, S)
        total = (values.view(M, A, R, S) * w).sum(-1)
        count = w.sum(-1)
        return torch.where(count > 0, total / count.clamp_min(1), torch.nan)

    p_hit = hit.view(M, A, R, S).mean(-1)
    traces = _traces(spec, grid, tracker, hit, steps)
    return Envelope(spec=spec, p_hit=p_hit, tof_s=per_cell(tof, hit), closing_ms=per_cell(closing, hit),
                    miss_m=per_cell(miss, 1.0 - hit), edge_km=_edges(p_hit, spec.ranges_km), dt=env.dt,
                    substeps=env.substeps, reach_km=tracker.missile[:steps + 1, -1].clone(), traces=traces,
                    wall_s=time.perf_counter() - t0, sim_steps=steps)


def _trace_index(spec: SweepSpec, grid: torch.Tensor) -> torch.Tensor:
    """Envs traced for the space-time diagram: sample 0 of every range at the traced aspects
    (those on the grid), every manoeuvre."""
    traced = [spec.aspects_deg.index(a) for a in spec.trace_aspects_deg if a in spec.aspects_deg]
    pick = (grid[:, 3] == 0) & torch.isin(grid[:, 1], torch.tensor(traced, dtype=torch.long))
    return pick.nonzero().squeeze(1)


def _traces(spec: SweepSpec, grid: torch.Tensor, tracker: _Tracker, hit: torch.Tensor, steps: int) -> list[dict]:
    out = []
    for j, i in enumerate(tracker.trace_idx[:-1].tolist()):
        m, a, r, _ = grid[i].tolist()
        out.append({"manoeuvre": spec.manoeuvres[m], "aspect_deg": spec.aspects_deg[a],
                    "range_km": spec.ranges_km[r], "hit": bool(hit[i] > 0.5),
                    "missile_km": tracker.missile[:steps + 1, j], "target_km": tracker.target[:steps + 1, j]})
    return out
