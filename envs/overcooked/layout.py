"""Overcooked kitchens: the ``.layout`` files of overcooked-ai 1.1.0, parsed, checked and turned into tables.

A layout file is a Python dict literal: ``"grid"`` (rows of ``X`` counter, ``O`` onion dispenser, ``T`` tomato
dispenser, ``D`` dish dispenser, ``P`` pot, ``S`` serving location, space floor, ``1``/``2`` the players' start
cells) plus the recipe configuration (orders, bonus orders, recipe values and cook times, reward shaping).
Layouts are read from the installed overcooked-ai package where there is one, else from the copies shipped
in ``layouts/`` next to this module (MIT-licensed data of HumanCompatibleAI/overcooked_ai).

Soups are identified by their recipe index ``onions + 4 * tomatoes`` (``0 <= onions + tomatoes <= 3``), so
every recipe quantity is a 16-entry table: cook time, value paid on delivery, ingredient count.
"""

from __future__ import annotations

import ast
import importlib.util
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAX_INGREDIENTS = 3
N_RECIPES = 16  # recipe index onions + 4 * tomatoes, both in [0, 3]
TOMATO_STEP = 4
TERRAIN_CODES = {" ": 0, "X": 1, "O": 2, "T": 3, "D": 4, "P": 5, "S": 6}
FLOOR, COUNTER, ONION_DISP, TOMATO_DISP, DISH_DISP, POT, SERVE = range(7)
BASE_SHAPING = {"PLACEMENT_IN_POT_REW": 3, "DISH_PICKUP_REWARD": 3, "SOUP_PICKUP_REWARD": 5}
DEFAULT_VALUE = DEFAULT_TIME = 20  # overcooked-ai's Recipe.value / Recipe.time without configuration
DEFAULT_ORDER_BONUS = 2
SHIPPED_DIR = Path(__file__).resolve().parent / "layouts"


@dataclass(frozen=True)
class Layout:
    """One kitchen: its grid and the tables the batched dynamics index.

    rows: the terrain, players' digits replaced by floor, ``height`` strings of ``width`` characters.
    starts: the players' start cells ``(x, y)``, player 1 first.
    recipe_time / recipe_value: per recipe index (``onions + 4 * tomatoes``), the cook time and the
        reward paid on delivery (0 for a recipe not among the orders, ``order_bonus`` times the value
        for a bonus order); entries of impossible recipes are unused.
    shaping: the shaped rewards ``PLACEMENT_IN_POT_REW``, ``DISH_PICKUP_REWARD``, ``SOUP_PICKUP_REWARD``.
    """

    name: str
    rows: tuple[str, ...]
    starts: tuple[tuple[int, int], ...]
    recipe_time: tuple[int, ...]
    recipe_value: tuple[float, ...]
    shaping: dict[str, float]

    @property
    def height(self) -> int:
        return len(self.rows)

    @property
    def width(self) -> int:
        return len(self.rows[0])

    def cell(self, x: int, y: int) -> int:
        """The index of cell ``(x, y)``: ``x * height + y``, overcooked-ai's ``[x][y]`` array order."""
        return x * self.height + y

    def terrain_codes(self) -> list[int]:
        """The terrain code of every cell, in cell order."""
        return [TERRAIN_CODES[self.rows[y][x]] for x in range(self.width) for y in range(self.height)]


def installed_dir() -> Path | None:
    """overcooked-ai's own layouts folder, where the package is installed (found, not imported)."""
    try:
        spec = importlib.util.find_spec("overcooked_ai_py")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "layouts"
    return path if path.is_dir() else None


def layout_files() -> dict[str, Path]:
    """Every known layout name and its file; the installed package's files win over the shipped copies."""
    files = {p.stem: p for p in SHIPPED_DIR.glob("*.layout")}
    where = installed_dir()
    if where is not None:
        files.update({p.stem: p for p in where.glob("*.layout")})
    return files


def layout_names() -> list[str]:
    return sorted(layout_files())


def read_layout_dict(path: Path) -> dict[str, Any]:
    """A layout file's dict, read as a literal (never executed); ``float('inf')`` is the one call allowed."""
    text = path.read_text().replace("float('inf')", "1e999").replace('float("inf")', "1e999")
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError) as err:
        raise ValueError(f"layout file {path} is not a dict literal ({err})") from None
    if not isinstance(value, dict) or "grid" not in value:
        raise ValueError(f"layout file {path} has no 'grid'")
    return value


def load_layout(layout: str | Sequence[str]) -> Layout:
    """The layout named ``layout`` (a ``.layout`` file's stem), or a grid given directly (a string with
    newlines or a sequence of rows) with overcooked-ai's defaults (every recipe worth 20, cook time 20).
    Raises ``ValueError`` with one line for an unknown name or a malformed kitchen."""
    if isinstance(layout, str) and "\n" not in layout:
        files = layout_files()
        if layout not in files:
            raise ValueError(f"unknown Overcooked layout {layout!r}; known: {', '.join(sorted(files))}")
        config = read_layout_dict(files[layout])
        name, grid = layout, config.pop("grid")
    else:
        name, grid, config = "custom", layout, {}
    # a grid string's lines are stripped, as overcooked-ai does; rows given one by one are taken as they are
    rows = [r for r in (line.strip() for line in grid.split("\n")) if r] if isinstance(grid, str) else list(grid)
    if config.get("start_state") is not None:
        raise ValueError(f"layout {name!r} sets a start_state; only layouts starting from their grid are supported")
    terrain, starts = parse_grid(rows, name)
    time, value = recipe_tables(config)
    shaping = dict(BASE_SHAPING)
    if config.get("rew_shaping_params"):
        shaping.update({k: v for k, v in config["rew_shaping_params"].items() if k in BASE_SHAPING})
    return Layout(name, tuple(terrain), tuple(starts), tuple(time), tuple(value),
                  {k: float(v) for k, v in shaping.items()})


def parse_grid(rows: list[str], name: str) -> tuple[list[str], list[tuple[int, int]]]:
    """The terrain rows (digits become floor) and the two start cells; one-line ``ValueError`` for a
    malformed kitchen (the checks of overcooked-ai's ``_assert_valid_grid``, two players, reachability)."""
    if not rows or any(len(r) != len(rows[0]) for r in rows):
        raise ValueError(f"layout {name!r}: the grid must be a non-empty rectangle of rows, got row lengths "
                         f"{[len(r) for r in rows]}")
    bad = sorted({c for r in rows for c in r} - set("XOTDPS12 "))
    if bad:
        raise ValueError(f"layout {name!r}: unknown grid characters {bad} (expected X O T D P S 1 2 and space, "
                         "exactly two players)")
    cells = "".join(rows)
    for ch, what in (("1", "player 1"), ("2", "player 2")):
        if cells.count(ch) != 1:
            raise ValueError(f"layout {name!r}: {what} ({ch!r}) must appear exactly once, got {cells.count(ch)}")
    for chars, what in (("P", "pot"), ("S", "serving location"), ("D", "dish dispenser"),
                        ("OT", "onion or tomato dispenser")):
        if not any(c in cells for c in chars):
            raise ValueError(f"layout {name!r}: no {what} ({'/'.join(chars)}) in the grid")
    border = rows[0] + rows[-1] + "".join(r[0] + r[-1] for r in rows)
    if any(c in " 12" for c in border):
        raise ValueError(f"layout {name!r}: the grid's border must not be walkable (floor or a player on it)")
    starts = [(r.index(ch), y) for ch in "12" for y, r in enumerate(rows) if ch in r]
    terrain = [r.replace("1", " ").replace("2", " ") for r in rows]
    check_reachable(terrain, starts, name)
    return terrain, starts


def check_reachable(terrain: list[str], starts: list[tuple[int, int]], name: str) -> None:
    """Between them the players must be able to face a pot, a serving location, a dish and an ingredient
    dispenser (one player may reach what the other cannot, as in forced_coordination)."""
    seen = set(starts)
    queue = deque(starts)
    while queue:
        x, y = queue.popleft()
        for dx, dy in ((0, -1), (0, 1), (1, 0), (-1, 0)):
            nxt = (x + dx, y + dy)
            if terrain[nxt[1]][nxt[0]] == " " and nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)
    faced = {terrain[y + dy][x + dx] for x, y in seen for dx, dy in ((0, -1), (0, 1), (1, 0), (-1, 0))}
    for chars, what in (("P", "pot"), ("S", "serving location"), ("D", "dish dispenser"),
                        ("OT", "ingredient dispenser")):
        if not faced & set(chars):
            raise ValueError(f"layout {name!r}: no {what} can be reached from the players' start cells")


def recipe_of(ingredients: Sequence[str]) -> int:
    onions = sum(1 for i in ingredients if i == "onion")
    tomatoes = sum(1 for i in ingredients if i == "tomato")
    if onions + tomatoes != len(ingredients) or not 0 < len(ingredients) <= MAX_INGREDIENTS:
        raise ValueError(f"a recipe is 1 to {MAX_INGREDIENTS} onions/tomatoes, got {list(ingredients)}")
    return onions + TOMATO_STEP * tomatoes


def recipe_tables(config: dict[str, Any]) -> tuple[list[int], list[float]]:
    """Cook time and delivery reward per recipe index, as overcooked-ai's ``Recipe.time``/``Recipe.value``
    and ``get_recipe_value`` compute them from the layout's configuration."""
    orders = [recipe_of(o["ingredients"]) for o in config.get("start_all_orders") or []]
    bonus = {recipe_of(o["ingredients"]) for o in config.get("start_bonus_orders") or []}
    valid = [r for r in range(N_RECIPES) if 0 < r % TOMATO_STEP + r // TOMATO_STEP <= MAX_INGREDIENTS]
    allowed = set(orders) if orders else set(valid)
    values = dict(zip(orders, config.get("recipe_values") or []))
    times = dict(zip(orders, config.get("recipe_times") or []))
    order_bonus = config.get("order_bonus", DEFAULT_ORDER_BONUS)
    time_table, value_table = [0] * N_RECIPES, [0.0] * N_RECIPES
    for r in valid:
        onions, tomatoes = r % TOMATO_STEP, r // TOMATO_STEP
        time_table[r] = _pick(config.get("cook_time"), times.get(r), config.get("onion_time"),
                              config.get("tomato_time"), onions, tomatoes, DEFAULT_TIME)
        value = _pick(config.get("delivery_reward"), values.get(r), config.get("onion_value"),
                      config.get("tomato_value"), onions, tomatoes, DEFAULT_VALUE)
        value_table[r] = 0.0 if r not in allowed else float(value * (order_bonus if r in bonus else 1))
    return time_table, value_table


def _pick(fixed: Any, mapped: Any, per_onion: Any, per_tomato: Any, onions: int, tomatoes: int, default: int) -> Any:
    """overcooked-ai's precedence (truthiness included): a fixed number, the per-recipe list, per-ingredient
    amounts, the default."""
    if fixed:
        return fixed
    if mapped is not None:
        return mapped
    if per_onion and per_tomato:
        return per_onion * onions + per_tomato * tomatoes
    return default
