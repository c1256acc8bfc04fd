"""A picture of each env for its docs page (``python -m bench.publish.figures --only envs``).

CartPole, Navigation and AirCombat are drawn by the renderers ``rl-system eval --render`` uses
(:mod:`rl_system.envs.render`), through the same episode loop (:func:`rl_system.policy.render.record_acting`), with
a scripted rule in place of a policy: the picture is the one a user gets of a trained run. AliceBob
and Overcooked have no such renderer; they are drawn here from their public state (the map and the
agents' cells; the kitchen's terrain, cooks and objects) with a small :class:`Renderer` of the same
shape. VMAS draws itself, through the renderer of ``rl-system eval --video`` on a ``vmas:`` env;
where it cannot draw headless the picture is skipped with a note. Env index 0 of a one-env batch,
a fixed seed, the shipped config's test kwargs.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from bench.harness.plots import ROOT, new_figure, provenance_note, save_png
from rl_system.envs.render import Renderer

SEED = 0
MAX_SIDE_PX = (800, 600)  # the renderers' figures are scaled to fit inside this


def _config(name: str) -> tuple[str, dict[str, Any]]:
    """The env name and test kwargs of ``launch/configs/<name>.yaml``."""
    from rl_system.config import load_config

    cfg = load_config(ROOT / "launch" / "configs" / f"{name}.yaml")
    return cfg.env.name, cfg.env.test_kwargs()


def record(renderer: Any, env_name: str, kwargs: dict[str, Any], act: Callable, max_steps: int,
           rule: str) -> dict[str, Any]:
    """One episode of env 0 under ``act(obs)``, fed to ``renderer``; the ``meta`` its draw reads
    (the eval renderers' own episode loop, :func:`rl_system.policy.render.record_acting`)."""
    from rl_system.policy.render import record_acting

    meta = record_acting(env_name, kwargs, lambda env: act, renderer, SEED, max_steps, algo=rule, policy_version=0,
                         deterministic=True)
    meta["info"] = {k: v for k, v in meta["info"].items() if not isinstance(v, list)}  # the scalars only
    meta["in_progress"] = not (meta["terminated"] or meta["truncated"])
    return meta


def draw(renderer: Any, meta: dict[str, Any], path: Path) -> Path:
    """The renderer's picture of the episode, scaled to :data:`MAX_SIDE_PX`, compacted."""
    fig = new_figure(*renderer.figsize)
    renderer.draw(fig, meta)
    for text in [*(ax.title for ax in fig.axes), *([fig._suptitle] if fig._suptitle else [])]:
        text.set_text(text.get_text().replace(" v0)", ")"))  # a rule has no policy version
    w, h = renderer.figsize
    return save_png(fig, path, width_px=int(w * min(MAX_SIDE_PX[0] / w, MAX_SIDE_PX[1] / h)))


# --------------------------------------------------------------------------- through the eval renderers


def render_cartpole(out: Path) -> Path:
    from rl_system.envs.render import make_renderer

    def lean(obs: dict[str, torch.Tensor]) -> torch.Tensor:  # push the cart under the pole
        s = obs["obs"]
        return (s[:, 2] + 0.5 * s[:, 3] > 0).long()

    name, kwargs = _config("cartpole_ppo")
    renderer = make_renderer(name)
    return draw(renderer, record(renderer, name, kwargs, lean, 150, "scripted lean rule"), out / "env_cartpole.png")


def render_navigation(out: Path) -> Path:
    from bench.bench_navigation import straight_policy
    from rl_system.envs.render import make_renderer

    gen = torch.Generator().manual_seed(SEED)
    name, kwargs = _config("navigation_ppo")
    renderer = make_renderer(name)
    meta = record(renderer, name, kwargs, lambda obs: straight_policy(obs, gen), 1000, "straight at the goal")
    return draw(renderer, meta, out / "env_navigation.png")


def render_air_combat(out: Path) -> Path:
    from bench.experiments.air_combat_baselines import scripted_red
    from rl_system.envs.render import make_renderer

    gen = torch.Generator().manual_seed(SEED)
    rule = scripted_red(fire_km=20.0, evade_km=20.0, salvo=1)
    name, kwargs = _config("air_combat_ppo")
    renderer = make_renderer(name)
    meta = record(renderer, name, kwargs, lambda obs: rule(obs, gen), 2000, "fire at 20 km, evade at 20 km")
    return draw(renderer, meta, out / "env_air_combat.png")


# --------------------------------------------------------------------------- drawn here


class AliceBobPicture(Renderer):
    """The map and both agents' paths over one episode (the env calls no autoreset observer, so
    the step that ends the episode is not captured: its reset state is not the episode's)."""

    figsize = (6.5, 5.2)

    def __init__(self) -> None:
        self.cells: list[list[tuple[int, int]]] = []
        self._ended = False

    def start(self, env: Any, obs: Any) -> None:
        self.env, self.layout = env, env.layout  # the oracle rule reads the env
        self.capture(env)

    def capture(self, env: Any) -> None:
        if not self._ended:
            self.cells.append([tuple(p) for p in env.positions[0].tolist()])

    def on_step(self, out: Any, action: torch.Tensor) -> None:
        self._ended = bool(out.terminated[0] | out.truncated[0])

    def draw(self, fig: Any, meta: dict[str, Any]) -> None:
        import numpy as np
        from matplotlib.colors import ListedColormap

        kinds = {"#": 1, "r": 2, "R": 2, "b": 3, "B": 3}
        grid = np.array([[kinds.get(ch, 0) for ch in row] for row in self.layout])
        ax = fig.add_subplot(1, 1, 1)
        ax.imshow(grid, cmap=ListedColormap(["white", "0.35", "#f4b6b6", "#b6c8f4"]), vmin=0, vmax=3)
        for i, row in enumerate(self.layout):
            for j, ch in enumerate(row):
                if ch in "rbRB":
                    label = "button" if ch.islower() else "diamond"
                    ax.text(j, i, "◆" if ch.isupper() else "●", ha="center", va="center", fontsize=14,
                            color="tab:red" if ch.lower() == "r" else "tab:blue")
                    ax.text(j, i + 0.42, label, ha="center", va="center", fontsize=6)
        for agent, (name, color) in enumerate((("Alice", "tab:green"), ("Bob", "tab:purple"))):
            path = np.array([c[agent] for c in self.cells])
            offset = 0.12 * (1 if agent else -1)
            ax.plot(path[:, 1] + offset, path[:, 0] + offset, color=color, lw=2, alpha=0.8, label=name)
            ax.plot(path[0, 1] + offset, path[0, 0] + offset, "o", color=color, ms=8)
        ax.set_xticks([])
        ax.set_yticks([])
        ax.legend(loc="lower center", bbox_to_anchor=(0.5, -0.12), ncol=2, fontsize=8, frameon=False)
        ax.set_title(f"{meta['env']} ({meta['algo']}): {meta['steps']} steps, "
                     f"return {meta['return']:.0f}; dot: start", fontsize=10)


def render_alice_bob(out: Path) -> Path:
    name, kwargs = _config("alice_bob_hmasd")
    picture = AliceBobPicture()
    meta = record(picture, name, kwargs, lambda obs: picture.env.oracle_actions(), 200, "scripted oracle")
    return draw(picture, meta, out / "env_alice_bob.png")


KITCHEN = {"X": ("counter", "#d9c7a7"), "O": ("onions", "#f2e394"), "T": ("tomatoes", "#f2a594"),
           "D": ("dishes", "#cfe3f2"), "P": ("pot", "0.55"), "S": ("serve", "#a7d9a9")}
DISHES = {1: "onion", 2: "tomato", 3: "dish", 4: "soup"}  # the env's object codes
FACING = ((0, -1), (0, 1), (1, 0), (-1, 0))  # N, S, E, W as (dx, dy), y down


class OvercookedPicture(Renderer):
    """The kitchen after a few steps: terrain, both cooks (facing arrow, what they hold), the
    objects on counters and in pots."""

    figsize = (5.0, 4.2)

    def __init__(self) -> None:
        self.state: dict[str, torch.Tensor] = {}

    def start(self, env: Any, obs: Any) -> None:
        self.layout = env.layout
        self.capture(env)

    def capture(self, env: Any) -> None:
        self.state = {k: v[0].clone() for k, v in env.state_dict().items() if k != "generator" and v.dim() > 0}

    def draw(self, fig: Any, meta: dict[str, Any]) -> None:
        from matplotlib.patches import Rectangle

        lay, s, h = self.layout, self.state, self.layout.height
        ax = fig.add_subplot(1, 1, 1)
        for y, row in enumerate(lay.rows):
            for x, ch in enumerate(row):
                label, color = KITCHEN.get(ch, ("", "white"))
                ax.add_patch(Rectangle((x - 0.5, y - 0.5), 1, 1, facecolor=color, edgecolor="0.3", lw=0.8))
                if label:
                    ax.text(x, y + 0.32, label, ha="center", va="center", fontsize=7)
                obj = int(s["obj"][x * h + y])
                if obj:
                    ax.text(x, y - 0.05, DISHES[obj], ha="center", va="center", fontsize=7, weight="bold")
        for cook, color in enumerate(("tab:blue", "tab:green")):
            cell, facing = int(s["pos"][cook]), int(s["ori"][cook])
            x, y = divmod(cell, h)
            ax.add_patch(plt_circle(x, y, color))
            dx, dy = FACING[facing]
            ax.annotate("", (x + 0.42 * dx, y + 0.42 * dy), (x, y), arrowprops={"arrowstyle": "->", "lw": 1.5})
            held = int(s["held"][cook])
            ax.text(x, y + 0.36, f"cook {cook + 1}" + (f": {DISHES[held]}" if held else ""),
                    ha="center", va="center", fontsize=7, color=color, weight="bold")
        ax.set_xlim(-0.5, lay.width - 0.5)
        ax.set_ylim(h - 0.5, -0.5)
        ax.set_aspect("equal")
        ax.set_axis_off()
        ax.set_title(f"Overcooked {lay.name} ({meta['algo']}), after {meta['steps']} steps", fontsize=10)


def plt_circle(x: float, y: float, color: str) -> Any:
    from matplotlib.patches import Circle

    return Circle((x, y), 0.25, facecolor=color, alpha=0.85)


def render_overcooked(out: Path) -> Path:
    picture = OvercookedPicture()
    gen = torch.Generator().manual_seed(SEED)
    meta = record(picture, "Overcooked", {"layout": "cramped_room"},
                  lambda obs: torch.randint(0, 6, (1, 2), generator=gen), 12, "random actions")
    return draw(picture, meta, out / "env_overcooked.png")


def render_vmas(out: Path, scenario: str = "balance", steps: int = 40) -> Path | None:
    """VMAS's own picture of env 0 after ``steps`` random steps (the renderer of ``rl-system eval
    --video``, :mod:`rl_system.envs.vmas_render`); None (with a note) where it cannot draw here."""
    from rl_system.envs.render import RenderError, make_renderer
    from rl_system.policy.render import record_acting

    def random_actions(env: Any) -> Callable:
        gen, shape = torch.Generator().manual_seed(SEED), (1, *env.action_spec.shape)
        return lambda obs: torch.rand(shape, generator=gen) * 2 - 1

    name, kwargs = _config(f"vmas_{scenario}_mappo")
    renderer = make_renderer(name)
    try:
        meta = record_acting(name, kwargs, random_actions, renderer, SEED, steps)
    except RenderError as err:  # the picture is optional
        print(f"envs: VMAS {scenario} not drawn ({err})")
        return None
    fig = new_figure(5.0, 5.2)
    ax = fig.add_subplot(1, 1, 1)
    ax.imshow(renderer.frames[-1])
    ax.set_axis_off()
    agents = kwargs.get("n_agents", "?")
    ax.set_title(f"VMAS {scenario} ({agents} agents, random actions, step {meta['steps']})", fontsize=10)
    provenance_note(fig, "VMAS's own renderer")
    return save_png(fig, out / f"env_vmas_{scenario}.png", width_px=500)


def render_all(results: Path, out: Path) -> list[Path]:
    paths = [render_cartpole(out), render_navigation(out), render_air_combat(out), render_alice_bob(out),
             render_overcooked(out), render_vmas(out)]
    return [p for p in paths if p is not None]


FIGURES: dict[str, Callable[[Path, Path], list[Path]]] = {"envs": render_all}
