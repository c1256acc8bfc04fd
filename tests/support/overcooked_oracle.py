"""The reference Overcooked simulator (overcooked-ai 1.1.0) for parity tests, and a scripted cook.

NumPy 2 shim: overcooked-ai 1.1.0 uses aliases NumPy 2 removed (``np.Inf`` in its planners and env
module, ``np.int`` in the layout generator). :func:`import_mdp` puts them back on the ``numpy`` module
before importing, for the test process only; the package itself is installed with
``pip install --no-deps overcooked-ai==1.1.0`` (its ``mdp`` module needs only numpy).
"""

from __future__ import annotations

import random
from collections import deque
from typing import Any

import numpy as np
import pytest

from rl_system.envs.overcooked.env import DISH, ONION, SOUP, TOMATO
from rl_system.envs.overcooked.layout import TOMATO_STEP

DIRS = [(0, -1), (0, 1), (1, 0), (-1, 0)]  # overcooked-ai's Direction.INDEX_TO_DIRECTION
OBJ_CODE = {"onion": ONION, "tomato": TOMATO, "dish": DISH, "soup": SOUP}


def _numpy2_shim() -> None:
    for name, value in (("Inf", np.inf), ("NaN", np.nan), ("int", int), ("float", float), ("bool", bool)):
        if not hasattr(np, name):
            setattr(np, name, value)


def import_mdp() -> Any:
    """overcooked-ai's ``overcooked_mdp`` module (the test is skipped where it is not installed)."""
    _numpy2_shim()
    pytest.importorskip("overcooked_ai_py", reason="parity needs overcooked-ai==1.1.0 (pip install --no-deps)")
    from overcooked_ai_py.mdp import overcooked_mdp

    return overcooked_mdp


def old_dynamics_mdp(om: Any, layout: str) -> Any:
    """Layout ``layout`` as overcooked-ai 1.1.0's ``OvercookedGridworld`` with the rules later overcooked-ai
    keeps behind ``old_dynamics=True`` (upstream's two changes, made here on 1.1.0): an interact never starts
    cooking (1.1.0 starts a pot where ``soup_to_be_cooked_at_location`` holds, its only use), and
    ``step_environment_effects`` starts every idle full pot before it cooks."""

    class OldDynamicsGridworld(om.OvercookedGridworld):
        def soup_to_be_cooked_at_location(self, state: Any, pos: Any) -> bool:
            return False

        def step_environment_effects(self, state: Any) -> None:
            for obj in state.objects.values():
                if obj.name == "soup" and not obj.is_cooking and not obj.is_ready and len(obj.ingredients) == 3:
                    obj.begin_cooking()
            super().step_environment_effects(state)

    mdp = om.OvercookedGridworld.from_layout_name(layout)  # builds the base class whatever it is called on
    mdp.__class__ = OldDynamicsGridworld
    return mdp


def action_of(index: int) -> Any:
    from overcooked_ai_py.mdp.actions import Action

    return Action.INDEX_TO_ACTION[index]


def recipe_index(soup: Any) -> int:
    ing = soup.ingredients
    return ing.count("onion") + TOMATO_STEP * ing.count("tomato")


def encode(state: Any, width: int, height: int) -> dict[str, np.ndarray]:
    """An oracle state in the env's own terms: cells ``x * H + y``, object codes, recipe indices, ticks."""
    cells = width * height
    out = {"pos": np.zeros(2, np.int64), "ori": np.zeros(2, np.int64), "held": np.zeros(2, np.int64),
           "held_rec": np.zeros(2, np.int64), "obj": np.zeros(cells, np.int64), "rec": np.zeros(cells, np.int64),
           "tick": np.full(cells, -1, np.int64), "t": np.int64(state.timestep)}
    for i, p in enumerate(state.players):
        out["pos"][i] = p.position[0] * height + p.position[1]
        out["ori"][i] = DIRS.index(p.orientation)
        if p.held_object is not None:
            out["held"][i] = OBJ_CODE[p.held_object.name]
            if p.held_object.name == "soup":
                out["held_rec"][i] = recipe_index(p.held_object)
    for (x, y), obj in state.objects.items():
        c = x * height + y
        out["obj"][c] = OBJ_CODE[obj.name]
        if obj.name == "soup":
            out["rec"][c] = recipe_index(obj)
            out["tick"][c] = obj._cooking_tick
    return out


def env_states(env: Any) -> list[dict[str, np.ndarray]]:
    """Every env's state in the same terms as :func:`encode` (the batch read once, then split)."""
    batch = {"pos": env._pos, "ori": env._ori, "held": env._held, "held_rec": env._held_rec, "obj": env._obj,
             "rec": env._rec, "tick": env._tick, "t": env._t}
    arrays = {key: t.numpy() for key, t in batch.items()}
    return [{key: a[k] for key, a in arrays.items()} for k in range(env.num_envs)]


class ScriptedCook:
    """A cook that mostly follows a plan (fetch ingredient, fill a pot, start it, fetch a dish, ladle, serve,
    hand things over counters where the kitchen is split) and acts at random a fraction ``eps`` of the time,
    so that random rollouts cook and serve soups. Plans from the oracle's state; Python, test-only."""

    def __init__(self, mdp: Any, rng: random.Random, eps: float = 0.2) -> None:
        self.mdp, self.rng, self.eps = mdp, rng, eps
        self.terrain = mdp.terrain_mtx
        self._memo: dict[str, set] = {}

    def act(self, state: Any, i: int) -> int:
        if self.rng.random() < self.eps:
            return self.rng.randrange(6)
        goals = self._goals(state, i)
        player = state.players[i]
        step = self._route(player.position, goals, state)
        if step is None:
            return self.rng.randrange(6)
        d, at_goal = step
        if at_goal:
            return 5 if player.orientation == DIRS[d] else d
        return d

    def _cells(self, chars: str) -> set:
        if chars not in self._memo:
            self._memo[chars] = {(x, y) for y, row in enumerate(self.terrain) for x, c in enumerate(row) if c in chars}
        return self._memo[chars]

    def _faced(self, pos: tuple) -> set:
        """The non-floor cells a cook standing at ``pos`` can get to face (its side of a split kitchen)."""
        if pos not in self._memo:
            region, queue = {pos}, deque([pos])
            while queue:
                x, y = queue.popleft()
                for dx, dy in DIRS:
                    nxt = (x + dx, y + dy)
                    if nxt not in region and self.terrain[nxt[1]][nxt[0]] == " ":
                        region.add(nxt)
                        queue.append(nxt)
            faced = {(x + dx, y + dy) for x, y in region for dx, dy in DIRS}
            self._memo[pos] = {c for c in faced if self.terrain[c[1]][c[0]] != " "}
        return self._memo[pos]

    def _goals(self, state: Any, i: int) -> set:
        """Cells to face and interact with, by what the cook holds, what the pots need and what this cook can
        reach (what it cannot, it hands over on a counter)."""
        held = state.players[i].held_object
        faced = self._faced(state.players[i].position)
        pots = {pos: state.objects.get(pos) for pos in self._cells("P")}
        idle_open = {p for p, s in pots.items() if s is None or (s.is_idle and len(s.ingredients) < 3)} & faced
        ready = {p for p, s in pots.items() if s is not None and s.is_ready} & faced
        counters = self._cells("X")
        empty_counters = {c for c in counters if c not in state.objects}
        serving = self._cells("S") & faced
        if held is None:
            return self._pickup_goals(state, i, pots, counters, serving)
        if held.name == "soup":
            return serving | (empty_counters if self.rng.random() < 0.3 else set()) if serving else empty_counters
        if held.name == "dish":
            return ready or (empty_counters if not self._cells("P") & faced else set())
        if not self._cells("P") & faced:
            return empty_counters
        return idle_open | (empty_counters if self.rng.random() < 0.3 else set())

    def _pickup_goals(self, state: Any, i: int, pots: dict, counters: set, serving: set) -> set:
        """An empty-handed cook's goals: start a pot, fetch a dish for a cooking pot, an ingredient, or a soup
        handed over on a counter where this cook can serve it."""
        startable = {p for p, s in pots.items() if s is not None and s.is_idle and len(s.ingredients) > 0
                     and (len(s.ingredients) == 3 or self.rng.random() < 0.05)}
        if startable:
            return startable
        busy = any(s is not None and not s.is_idle for s in pots.values())
        other = state.players[1 - i].held_object
        dish_wanted = busy and (other is None or other.name != "dish")
        want = "dish" if dish_wanted else self.rng.choice(["onion", "ingredient"])
        if want == "dish":
            disp = self._cells("D")
        else:  # onions mostly (the classic recipes), any ingredient sometimes
            disp = self._cells("OT" if want == "ingredient" else "O") or self._cells("T")
        disp = disp & self._faced(state.players[i].position)  # (not &=: the cell sets are cached)
        names = ("dish",) if want == "dish" else ("onion", "tomato")
        names += ("soup",) if serving else ()
        lying = {c for c in counters if c in state.objects and state.objects[c].name in names}
        return (disp | lying) if self.rng.random() < 0.5 else (disp or lying)

    def _route(self, start: tuple, goals: set, state: Any) -> tuple[int, bool] | None:
        """The first move toward the nearest floor cell next to a goal (BFS), and whether it is a turn to
        face a goal from where the cook stands; ``None`` when no goal can be reached."""
        if not goals:
            return None
        for d, (dx, dy) in enumerate(DIRS):
            if (start[0] + dx, start[1] + dy) in goals:
                return d, True
        first = {start: None}
        queue = deque([start])
        while queue:
            x, y = queue.popleft()
            for d, (dx, dy) in enumerate(DIRS):
                nxt = (x + dx, y + dy)
                if nxt in first or self.terrain[nxt[1]][nxt[0]] != " ":
                    continue
                first[nxt] = d if first[(x, y)] is None else first[(x, y)]
                if any((nxt[0] + ex, nxt[1] + ey) in goals for ex, ey in DIRS):
                    return first[nxt], False
                queue.append(nxt)
        return None
