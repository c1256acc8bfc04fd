"""The observations of :class:`rl_system.envs.air_combat.env.AirCombatVecEnv`, built from its state
tensors in one batched pass for red and (mirrored) blue. The layout of ``obs["obs"]`` is in
:mod:`rl_system.envs.air_combat.spec`, the meaning of each entry in the env's module docstring.
"""

from __future__ import annotations

import torch

from rl_system.envs.air_combat.physics import (
    _A_FIELDS,
    _AALIVE,
    _ACOOL,
    _ACOS,
    _ALEFT,
    _ASIN,
    _ASPEED,
    _AVX,
    _AVY,
    _AX,
    _AY,
    _MACT,
    _MX,
    _NO_MISSILE_R2,
    MISSILES_PER_SIDE,
    V_TERMINAL,
)
from rl_system.envs.air_combat.spec import N_DISCRETE_ACTIONS, OBS_DIM, RANGE_SCALE_M
from rl_system.envs.base import Obs


class ObsPlan:
    """Views and scratch tensors for building observations from one aircraft state ``A``
    [fields, 2, K] and missile state ``M`` [fields, 2, 6, K]: the whole batch (kept between
    steps), or a gather buffer for some envs. ``both``: observers red and blue in one pass
    (``S = 2``; observer ``s`` against enemy ``1 - s``), else red only (``S = 1``). ``fresh``:
    the envs were just reset, so no missile is in flight and every fire action is legal; ``M`` is
    not read and the missile entries are constants. Building the views once keeps the per-step
    op count (and the Python overhead) down."""

    def __init__(self, A: torch.Tensor, M: torch.Tensor | None, both: bool, fresh: bool = False) -> None:
        s, k = (2 if both else 1), A.shape[2]
        f32 = dict(dtype=torch.float32, device=A.device)
        self.both, self.fresh, self.A, self.M, self.s, self.k = both, fresh, A, M, s, k
        if both:
            self.swap = torch.tensor([1, 0], device=A.device)
            self.foe = torch.empty(_A_FIELDS, 2, k, **f32)               # A with the sides swapped
            own, foe = A, self.foe
        else:
            own, foe = A[:, :1], A[:, 1:]
        self.head5, self.oxy, self.ovxy, self.oc, self.os = (own[_ASPEED:_ALEFT + 1], own[_AX:_AY + 1],
                                                             own[_AVX:_AVY + 1], own[_ACOS], own[_ASIN])
        self.own_alive, self.own_left, self.own_cool = own[_AALIVE], own[_ALEFT], own[_ACOOL]
        self.fxy, self.fvxy, self.fc, self.fs = foe[_AX:_AY + 1], foe[_AVX:_AVY + 1], foe[_ACOS], foe[_ASIN]
        # Observation rows [S, 16, K] (transposed to [S, K, 16] at the end) and scratch.
        self.rows = torch.empty(s, OBS_DIM, k, **f32)
        self.row = self.rows.unbind(1)
        self.head_rows = self.rows[:, 0:5].transpose(0, 1)
        self.dxy, self.dvxy = torch.empty(2, s, k, **f32), torch.empty(2, s, k, **f32)
        self.ux, self.uy = self.dxy.unbind(0)
        self.rng = torch.empty(s, k, **f32)
        if fresh:  # warning 0, nearest missile range 1 (none), its bearing 0, none in flight
            self.rows[:, 11:16] = torch.tensor([0.0, 1.0, 0.0, 0.0, 0.0], **f32).view(1, 5, 1)
            return
        if both:
            self.inc = torch.empty(3, 2, MISSILES_PER_SIDE, k, **f32)    # enemy missiles x, y, active
            inc, own_active = self.inc, M[_MACT]
        else:
            inc, own_active = M[_MX:_MACT + 1, 1:], M[_MACT, :1]
        self.oxy6 = self.oxy.unsqueeze(2)
        self.inc_xy, self.inc_active, self.own_active = inc[:2], inc[2], own_active
        self.sel = torch.empty(2, s, k, **f32)
        self.sx, self.sy = self.sel.unbind(0)
        self.mr, self.can, self.tmp = (torch.empty(s, k, **f32) for _ in range(3))
        self.mdxy = torch.empty(2, s, MISSILES_PER_SIDE, k, **f32)
        self.mdx, self.mdy = self.mdxy.unbind(0)
        self.mr2, self.empty = (torch.empty(s, MISSILES_PER_SIDE, k, **f32) for _ in range(2))
        self.nearest = torch.empty(s, 1, k, **f32)
        self.nearest_sq = self.nearest.squeeze(1)

    def build(self, scale: torch.Tensor, eye: torch.Tensor, discrete: bool) -> tuple[Obs, Obs | None]:
        p, row = self, self.row
        if p.both:
            torch.index_select(p.A, 1, p.swap, out=p.foe)
        oc, os_ = p.oc, p.os
        # 0..4: speed, sin/cos heading, throttle, missiles left: scaled rows of the state.
        torch.mul(p.head5, scale, out=p.head_rows)
        # Enemy: range, bearing (its direction rotated into the own frame), closure, heading.
        torch.sub(p.fxy, p.oxy, out=p.dxy)
        torch.hypot(p.ux, p.uy, out=p.rng)
        torch.mul(p.rng, 1.0 / RANGE_SCALE_M, out=row[5])
        p.dxy.mul_(p.rng.clamp_min_(1.0).reciprocal_())                  # unit vector to the enemy
        torch.mul(p.uy, oc, out=row[6]).addcmul_(p.ux, os_, value=-1.0)  # sin(bearing)
        torch.mul(p.ux, oc, out=row[7]).addcmul_(p.uy, os_)              # cos(bearing)
        torch.sub(p.fvxy, p.ovxy, out=p.dvxy)
        torch.sum(p.dvxy.mul_(p.dxy), dim=0, out=row[8]).mul_(-0.5 / V_TERMINAL)  # closure (+ = closing)
        torch.mul(p.fs, oc, out=row[9]).addcmul_(p.fc, os_, value=-1.0)  # sin(enemy - own heading)
        torch.mul(p.fc, oc, out=row[10]).addcmul_(p.fs, os_)             # cos
        if not p.fresh:
            # Nearest incoming (enemy) missile; empty slots count as _NO_MISSILE_R2 away.
            if p.both:
                torch.index_select(p.M[_MX:_MACT + 1], 1, p.swap, out=p.inc)
            torch.sub(p.inc_xy, p.oxy6, out=p.mdxy)                      # [2, S, 6, K]
            mr2 = torch.mul(p.mdx, p.mdx, out=p.mr2).addcmul_(p.mdy, p.mdy).mul_(p.inc_active)
            mr2.add_(torch.sub(1.0, p.inc_active, out=p.empty), alpha=_NO_MISSILE_R2)
            torch.amin(mr2, dim=1, keepdim=True, out=p.nearest)
            pick = torch.eq(mr2, p.nearest, out=mr2)                     # one-hot (or tied slots)
            torch.sum(p.mdxy.mul_(pick), dim=2, out=p.sel)               # [2, S, K] offset to it
            present = torch.amax(p.inc_active, dim=1, out=row[11])
            torch.mul(torch.sqrt(p.nearest_sq, out=p.mr), 1.0 / RANGE_SCALE_M, out=row[12]).clamp_max_(1.0)
            norm = torch.hypot(p.sx, p.sy, out=p.mr).clamp_min_(1.0).reciprocal_().mul_(present)
            p.sel.mul_(norm)                                             # unit vector, 0 if none
            torch.mul(p.sy, oc, out=row[13]).addcmul_(p.sx, os_, value=-1.0)
            torch.mul(p.sx, oc, out=row[14]).addcmul_(p.sy, os_)
            torch.sum(p.own_active, dim=1, out=row[15]).mul_(1.0 / MISSILES_PER_SIDE)
        # [S, 16, K] -> [S, K, 16]: a product with the identity is an exact transpose (the obs are
        # finite) and about twice as fast on CPU as a strided copy.
        obs_all = torch.empty(p.s, p.k, OBS_DIM, dtype=torch.float32, device=p.rows.device)
        for i in range(p.s):
            torch.mm(p.rows[i].t(), eye, out=obs_all[i])
        out = [{"obs": obs_all[i]} for i in range(p.s)]
        if discrete:
            mask_all = torch.ones(p.s, p.k, N_DISCRETE_ACTIONS, dtype=torch.bool, device=p.rows.device)
            if not p.fresh:  # fire rule: alive, missiles left, cooldown over
                can = torch.gt(p.own_left, 0.5, out=p.can).mul_(p.own_alive)
                can.mul_(torch.le(p.own_cool, 0.0, out=p.tmp))
                mask_all[:, :, 6:] = (can > 0.5).unsqueeze(2)
            for i, o in enumerate(out):
                o["action_mask"] = mask_all[i]
        return out[0], (out[1] if p.both else None)

