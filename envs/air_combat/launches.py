"""Where a policy fires, and what becomes of each missile: ``rl-system eval RUN --launch-map OUT.png``.

:class:`LaunchLog` rides on an :class:`~rl_system.envs.air_combat.AirCombatVecEnv` (``env.launch_log``),
which calls it at every launch, after every physics sub-step and before every reset. Per launch
it keeps the geometry at the moment of firing (range, target aspect, off-boresight angle, both
speeds, the sim time into the episode) and then the missile's fate: ``hit``, ``miss`` (it
self-destructed: too slow after burn-out or too old) or ``cut`` (still in flight when its
episode ended, e.g. because another missile decided the duel). Launches are rare, so the log
keeps plain Python lists; an env without a log pays one ``None`` check per hook.

:func:`classify` places the logged launches against a missile envelope
(:mod:`rl_system.envs.air_combat.envelope`). Running a checkpoint's policy with a log attached is
:func:`rl_system.policy.launch_map.launch_map`'s part: this module only records and sorts what an env
did.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from rl_system.envs.air_combat.envelope import Envelope, aspect_deg
from rl_system.envs.air_combat.physics import wrap_angle

OUTCOMES = ("hit", "miss", "cut", "pending")
COLUMNS = ("side", "env", "shot", "range_km", "aspect_deg", "off_boresight_deg", "shooter_speed", "target_speed",
           "t_s")


class LaunchLog:
    """Every launch of both sides of one env batch and its outcome (see the module docstring)."""

    def __init__(self, env: Any) -> None:
        self.num_envs = env.num_envs
        self._slot_record = torch.full((2, 6, env.num_envs), -1, dtype=torch.int64, device=env.device)
        self._active = env.views()["m_active"]    # live view of the missiles in flight
        self._columns: dict[str, list[torch.Tensor]] = {c: [] for c in COLUMNS}
        self._outcome: list[str] = []
        self.episodes_ended = 0                   # episodes that ended (reset) since the log was attached

    def on_launch(self, env: Any, flat: torch.Tensor, slot: torch.Tensor) -> None:
        """``flat`` int64 ``[k]``: ``side * N + env`` of each launch; ``slot``: its flat index into
        the ``[2, 6, N]`` missile slots. Called before the launch changes the state."""
        v, n = env.views(), self.num_envs
        side, e = flat.div(n, rounding_mode="floor"), flat.remainder(n)
        foe = 1 - side

        def pick(name: str, who: torch.Tensor) -> torch.Tensor:
            return v[name][who, e]

        own_xy = torch.stack((pick("x", side), pick("y", side)))
        foe_xy = torch.stack((pick("x", foe), pick("y", foe)))
        d = foe_xy - own_xy
        bearing = torch.atan2(d[1], d[0]) - pick("heading", side)
        off = torch.rad2deg(wrap_angle(bearing).abs())
        shot = slot.div(n, rounding_mode="floor").remainder(6) + 1       # 1: the side's first launch this episode
        values = {"side": side, "env": e, "shot": shot, "range_km": torch.hypot(d[0], d[1]) / 1000.0,
                  "aspect_deg": aspect_deg(foe_xy, pick("heading", foe), own_xy), "off_boresight_deg": off,
                  "shooter_speed": pick("speed", side), "target_speed": pick("speed", foe),
                  "t_s": env._steps.index_select(0, e).float() * env.dt}
        for name, value in values.items():
            self._columns[name].append(value.detach().cpu())
        first = len(self._outcome)
        self._outcome.extend(["pending"] * flat.numel())
        ids = torch.arange(first, first + flat.numel(), device=slot.device)
        self._slot_record.view(-1).index_copy_(0, slot, ids)

    def on_substep(self, env: Any, hit: torch.Tensor) -> None:
        """``hit`` float ``[2, 6, N]``: the slots that hit in this sub-step (the rest of the ended
        ones self-destructed)."""
        rec = self._slot_record
        ended = (rec >= 0) & ((hit > 0.5) | (self._active < 0.5))
        if bool(ended.any()):
            for i, h in zip(rec[ended].tolist(), (hit[ended] > 0.5).tolist()):
                self._outcome[i] = "hit" if h else "miss"
            rec[ended] = -1

    def on_reset(self, idx: torch.Tensor) -> None:
        """Envs ``idx`` are about to reset: their missiles still in flight are cut short."""
        self.episodes_ended += idx.numel()
        rec = self._slot_record.index_select(2, idx)
        live = rec >= 0
        if bool(live.any()):
            for i in rec[live].tolist():
                self._outcome[i] = "cut"
            self._slot_record.index_fill_(2, idx, -1)

    def records(self, side: int | None = None) -> dict[str, list]:
        """Column lists, one entry per launch in launch order (of ``side`` only if given):
        :data:`COLUMNS` and ``outcome`` (:data:`OUTCOMES`)."""
        cols = {c: (torch.cat(parts).tolist() if parts else []) for c, parts in self._columns.items()}
        cols["outcome"] = list(self._outcome)
        if side is None:
            return cols
        keep = [i for i, s in enumerate(cols["side"]) if s == side]
        return {c: [values[i] for i in keep] for c, values in cols.items()}


def classify(envelope: Envelope, launches: dict[str, list]) -> dict[str, Any]:
    """Where launches fall against the envelope's edges, interpolated at each launch's aspect:
    inside the no-escape range, between it and the maximum range, or beyond; with the hit rate
    of each group and the fraction fired more than 30° off the nose (the envelope is for shots
    on the nose)."""
    aspects = np.asarray(envelope.spec.aspects_deg)
    r_ne = _edge_at(envelope.r_no_escape_km, aspects, launches["aspect_deg"])
    r_max = _edge_at(envelope.r_max_km, aspects, launches["aspect_deg"])
    rng = np.asarray(launches["range_km"], dtype=float)
    groups = {"inside_no_escape": rng <= r_ne, "between": (rng > r_ne) & (rng <= r_max), "beyond_max": rng > r_max}
    hit = np.asarray([o == "hit" for o in launches["outcome"]])
    decided = np.asarray([o in ("hit", "miss") for o in launches["outcome"]])
    out: dict[str, Any] = {"launches": int(rng.size), "hit_rate": _rate(hit, decided)}
    for name, mask in groups.items():
        out[name] = {"fraction": float(mask.mean()) if rng.size else None, "hit_rate": _rate(hit & mask, decided & mask)}
    out["off_nose_fraction"] = float(np.mean(np.asarray(launches["off_boresight_deg"]) > 30.0)) if rng.size else None
    out["outcomes"] = {o: launches["outcome"].count(o) for o in OUTCOMES}
    first = np.asarray(launches["shot"]) == 1
    out["first_shots"] = {"count": int(first.sum()), "hit_rate": _rate(hit & first, decided & first),
                          "range_km_median": _median(rng[first]),
                          "aspect_deg_median": _median(np.asarray(launches["aspect_deg"], dtype=float)[first]),
                          "inside_no_escape": float(groups["inside_no_escape"][first].mean()) if first.any() else None}
    out["later_shots"] = {"count": int((~first).sum()), "hit_rate": _rate(hit & ~first, decided & ~first),
                          "cut_fraction": float(np.mean(np.asarray(launches["outcome"])[~first] == "cut"))
                          if (~first).any() else None}
    return out


def _median(values: np.ndarray) -> float | None:
    return float(np.median(values)) if values.size else None


def _edge_at(edge: torch.Tensor | None, aspects: np.ndarray, at: list[float]) -> np.ndarray:
    if edge is None:
        return np.full(len(at), np.nan)
    return np.interp(np.asarray(at, dtype=float), aspects, np.nan_to_num(edge.numpy(), nan=0.0))


def _rate(hits: np.ndarray, decided: np.ndarray) -> float | None:
    return float(hits.sum() / decided.sum()) if decided.sum() else None
