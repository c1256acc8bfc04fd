"""Overcooked (overcooked-ai 1.1.0's ``OvercookedGridworld``), N kitchens stepped as torch tensors.

Two cooks share a kitchen and are paid for every soup they serve. Each step follows overcooked-ai's
``get_state_transition`` exactly:

1. Interacts, cook 1's first, then cook 2's on the state cook 1 left (so two cooks at one counter or
   pot act in that order). Facing a counter: put down what is held on an empty counter, or pick up what lies
   there with empty hands. Facing a dispenser with empty hands: take an onion, a tomato or a dish. Facing a
   pot: add a held ingredient while the pot is idle with fewer than 3 ingredients; with empty hands start
   cooking an idle pot with at least one ingredient (cooking never starts by itself); with a dish take a
   ready soup. Facing a serving location with a soup: deliver it, paid by the recipe's value (0 for a
   recipe not among the layout's orders).
2. Moves: a move turns the cook that way and steps into the cell if it is floor; if the cooks would end in
   one cell or swap cells, neither moves (both still turn). ``stay`` and ``interact`` change nothing.
3. Every cooking soup advances one tick; it is ready once the tick reaches the recipe's cook time.

``old_dynamics=True`` is the benchmark's first rules (Carroll et al. 2019), which overcooked-ai keeps behind
its ``OvercookedGridworld(old_dynamics=True)`` (after 1.1.0) and the MAPPO-lineage Overcooked codebases
train the classic layouts with: an interact never starts cooking; a pot starts by itself in step 3 once
it holds 3 ingredients (and cooks its first tick that step), so no soup of fewer ingredients is ever
cooked. It takes layouts whose orders are all of 3 ingredients (the classic five are).

Actions ``AgentDiscrete(6, 2)``: 0 north, 1 south, 2 east, 3 west, 4 stay, 5 interact (overcooked-ai's
``Action.INDEX_TO_ACTION``). Episodes start from the layout's start cells, both cooks facing north, and
are truncated after ``horizon`` steps (400); there is no terminal state.

Reward ``[N]`` float32: the delivery reward of both cooks plus ``reward_shaping`` times their shaped reward
(overcooked-ai's: placing an ingredient in a pot 3, taking a dish while a pot needs one 3, taking a soup 5),
the factor annealed linearly to 0 over ``reward_shaping_horizon`` env steps of the whole batch (``None``:
constant); with ``team_reward=False`` each cook's own ``[N, 2]``. ``info``: ``sparse_reward`` and
``shaped_reward`` ``[N, 2]`` per cook, ``soups_served`` ``[N]``.

Observations: ``"obs"`` ``[N, 2, W * H * 26]`` float32 is overcooked-ai's ``lossless_state_encoding`` of
each cook (26 planes over the ``W x H`` grid: the cook's and the partner's cell and facing, the terrain,
ingredients and soups in pots, cook time left, soups, dishes, onions, tomatoes, urgency in the last 40
steps), flattened in its ``[W, H, 26]`` order (``x``, then ``y``, then plane); reshape to ``[W, H, 26]``
for a convolution. ``"state"`` ``[N, W * H * 26]`` is cook 1's encoding: lossless, so it is the global
state.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from rl_system.envs.base import AgentDiscrete, Obs, StepResult, TensorSpec, VecEnv, make_generator
from rl_system.envs.overcooked.layout import (
    COUNTER,
    DISH_DISP,
    FLOOR,
    MAX_INGREDIENTS,
    ONION_DISP,
    POT,
    SERVE,
    TOMATO_DISP,
    TOMATO_STEP,
    Layout,
    load_layout,
)

N_ACTIONS, STAY, INTERACT = 6, 4, 5
NONE, ONION, TOMATO, DISH, SOUP = range(5)  # object codes, held or on a cell
N_PLANES = 26
URGENCY_STEPS = 40  # lossless_state_encoding's urgency plane: fewer than this many steps left
STATE_KEYS = ("pos", "ori", "held", "held_rec", "obj", "rec", "tick", "t", "served", "batch_steps")


class OvercookedVecEnv(VecEnv):
    """``num_envs`` Overcooked kitchens on ``device``; see the module docstring.

    Parameters
        layout: a layout name (:func:`rl_system.envs.overcooked.layout_names`, e.g. ``"cramped_room"``) or a
            grid (a string with newlines or a sequence of rows) with overcooked-ai's default recipes.
        horizon: steps per episode (truncation).
        reward_shaping: the initial weight of the shaped reward in ``reward`` (0: delivery reward only).
        reward_shaping_horizon: env steps (summed over the batch) over which that weight anneals to 0.
        team_reward: one reward for the team ``[N]`` (the cooks' sum); ``False``: each cook's own ``[N, 2]``.
        old_dynamics: a pot starts cooking by itself once full, never on an interact (module docstring).
    """

    num_agents = 2
    episode_stats = ("soups_served",)  # logged as rollout/soups_served_mean; rl-system eval's mean and std

    def __init__(self, num_envs: int, device: str | torch.device = "cpu", seed: int | None = None, *,
                 layout: str | Sequence[str] = "cramped_room", horizon: int = 400, reward_shaping: float = 0.0,
                 reward_shaping_horizon: float | None = None, team_reward: bool = True,
                 old_dynamics: bool = False) -> None:
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        if horizon < 1:
            raise ValueError(f"horizon must be >= 1, got {horizon}")
        if reward_shaping_horizon is not None and reward_shaping_horizon <= 0:
            raise ValueError(f"reward_shaping_horizon must be > 0 or None, got {reward_shaping_horizon}")
        self.layout: Layout = load_layout(layout)
        self.num_envs, self.device = int(num_envs), torch.device(device)
        self.horizon = int(horizon)
        self.reward_shaping = float(reward_shaping)
        self.reward_shaping_horizon = reward_shaping_horizon
        self.team_reward = bool(team_reward)
        self.old_dynamics = bool(old_dynamics)
        self.width, self.height = self.layout.width, self.layout.height
        self.obs_dim = self.width * self.height * N_PLANES
        self.action_spec = AgentDiscrete(N_ACTIONS, self.num_agents)
        self.observation_spec = {"state": TensorSpec((self.obs_dim,), torch.float32),
                                 "obs": TensorSpec((self.num_agents, self.obs_dim), torch.float32)}
        self._generator = make_generator(self.device, seed)  # starts are deterministic; kept for the API
        self._build_tables()
        if self.old_dynamics and bool((self._rec_value > 0).logical_and(self._rec_count != MAX_INGREDIENTS).any()):
            raise ValueError(f"old_dynamics takes layouts whose orders are all of {MAX_INGREDIENTS} ingredients; "
                             f"layout {self.layout.name!r} orders others")
        self._alloc_state()
        self._needs_reset = True

    # ------------------------------------------------------------------ tables and state

    def _build_tables(self) -> None:
        dev, h, lay = self.device, self.height, self.layout
        self._terrain = torch.tensor(lay.terrain_codes(), dtype=torch.int64, device=dev)  # [C]
        self._pots = (self._terrain == POT).nonzero().squeeze(1)  # [P] pot cells
        self._delta = torch.tensor([-1, 1, h, -h, 0, 0], dtype=torch.int64, device=dev)  # per action, in cells
        self._rec_time = torch.tensor(lay.recipe_time, dtype=torch.int64, device=dev)  # [16]
        self._rec_value = torch.tensor(lay.recipe_value, dtype=torch.float32, device=dev)  # [16]
        rec = torch.arange(len(lay.recipe_time), device=dev)
        self._rec_count = rec % TOMATO_STEP + rec // TOMATO_STEP  # [16] ingredients in the soup
        # per recipe, float: onions, tomatoes (lookups are cheaper than integer division per cell)
        self._rec_onions, self._rec_tomatoes = (rec % TOMATO_STEP).float(), (rec // TOMATO_STEP).float()
        self._add_step = torch.tensor([0, 1, TOMATO_STEP, 0, 0], dtype=torch.int64, device=dev)  # per held code
        self._shaping = {k: torch.tensor(v, device=dev) for k, v in lay.shaping.items()}
        # lossless_state_encoding's terrain planes 10..15: pot, counter, onion, tomato, dish dispenser, serving
        template = torch.zeros((self._terrain.numel(), N_PLANES), device=dev)
        for plane, code in enumerate((POT, COUNTER, ONION_DISP, TOMATO_DISP, DISH_DISP, SERVE), start=10):
            template[:, plane] = (self._terrain == code).float()
        self._template = template  # [C, 26]
        self._is_pot = self._terrain == POT
        self._start_pos = torch.tensor([lay.cell(x, y) for x, y in lay.starts], dtype=torch.int64, device=dev)
        self._perm = torch.tensor([[0, 1], [1, 0]], device=dev)  # each cook's view: itself first
        # per view (self, other): the planes of the cell and of the facing (+ direction) of each cook
        self._loc_plane = torch.tensor([0, 1], device=dev)
        self._facing_plane = torch.tensor([2, 6], device=dev)

    def _alloc_state(self) -> None:
        n, c, dev = self.num_envs, len(self.layout.terrain_codes()), self.device
        zeros = lambda *shape: torch.zeros(shape, dtype=torch.int64, device=dev)
        self._pos, self._ori = zeros(n, 2), zeros(n, 2)  # cell index x * H + y; facing 0..3 (N, S, E, W)
        self._held, self._held_rec = zeros(n, 2), zeros(n, 2)  # object code; recipe index of a held soup
        self._obj, self._rec = zeros(n, c), zeros(n, c)  # object on each cell; its recipe index if a soup
        self._tick = zeros(n, c) - 1  # a soup's cooking tick, -1 while idle (and on cells without a soup)
        self._t, self._served = zeros(n), zeros(n)  # timestep; soups served this episode
        self._batch_steps = zeros()  # env steps of the whole batch, for annealing the shaping
        self._row_start = torch.arange(n, device=dev) * c  # [N] each env's first cell in the flattened tensors

    def _restart(self, done: torch.Tensor | None) -> None:
        """Put the envs where ``done`` (bool ``[N]``; ``None``: all) back at the start state."""
        if done is None:
            done = torch.ones(self.num_envs, dtype=torch.bool, device=self.device)
        d1 = done.unsqueeze(1)
        self._pos = torch.where(d1, self._start_pos, self._pos)
        for name in ("_ori", "_held", "_held_rec", "_obj", "_rec"):
            setattr(self, name, getattr(self, name).masked_fill(d1, 0))
        self._tick = self._tick.masked_fill(d1, -1)
        self._t = self._t.masked_fill(done, 0)
        self._served = self._served.masked_fill(done, 0)

    # ------------------------------------------------------------------ public API

    def reset(self, seed: int | None = None) -> Obs:
        """Reset all envs to the layout's start state (deterministic; ``seed`` reseeds the unused generator)."""
        if seed is not None:
            self._generator.manual_seed(seed)
        self._restart(None)
        self._needs_reset = False
        return self._observe()

    def state_dict(self) -> dict[str, torch.Tensor]:
        state = {k: getattr(self, f"_{k}").clone() for k in STATE_KEYS}
        state["generator"] = self._generator.get_state()
        return state

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        for key in STATE_KEYS:
            want = tuple(getattr(self, f"_{key}").shape)
            if key not in state or tuple(state[key].shape) != want:
                got = tuple(state[key].shape) if key in state else "missing"
                raise ValueError(f"state[{key!r}] must have shape {want} for this layout and batch, got {got}")
        for key in STATE_KEYS:
            setattr(self, f"_{key}", state[key].to(device=self.device, dtype=torch.int64).clone())
        self._generator.set_state(state["generator"])
        self._needs_reset = False

    @property
    def shaping_weight(self) -> float:
        """The weight of the shaped reward at the next step (after annealing)."""
        return float(self._shaping_weight())

    def _shaping_weight(self) -> torch.Tensor:
        """:attr:`shaping_weight` as a 0-dim tensor on ``device`` (no host sync)."""
        if self.reward_shaping_horizon is None:
            return torch.tensor(self.reward_shaping, device=self.device)
        left = (1.0 - self._batch_steps / self.reward_shaping_horizon).clamp(min=0.0)
        return self.reward_shaping * left

    def step(self, action: torch.Tensor) -> StepResult:
        action = self._step_action(action)
        if self.device.type == "cpu":
            lo, hi = torch.aminmax(action)
            if lo < 0 or hi >= N_ACTIONS:
                raise ValueError(f"actions must be in [0, {N_ACTIONS}), got values in [{int(lo)}, {int(hi)}]")
        weight = self._shaping_weight()
        sparse, shaped, served = self._interact(action)
        self._move(action)
        self._cook()
        self._t += 1
        self._batch_steps += self.num_envs
        self._served += served.sum(1)
        reward = sparse + weight * shaped
        if self.team_reward:
            reward = reward.sum(1)
        truncated = self._t >= self.horizon
        terminated = torch.zeros_like(truncated)
        info = {"sparse_reward": sparse, "shaped_reward": shaped, "soups_served": self._served.clone()}
        final_obs = self._observe()
        obs = final_obs
        # all envs of a batch usually end together; on an accelerator, restart without asking the host
        if self.device.type != "cpu" or bool(truncated.any()):
            self._restart(truncated)
            obs = self._observe()
        return StepResult(obs, reward, terminated, truncated, final_obs, info)

    # ------------------------------------------------------------------ dynamics

    def _interact(self, action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Both cooks' interacts, cook 1 first. Returns float32 ``[N, 2]`` delivery and shaped rewards and bool
        ``[N, 2]`` soups served (a soup no order wants is served for nothing)."""
        # overcooked-ai reads the pots' states once, before cook 1 acts, for both cooks' dish rewards
        pots_wanting_dish = self._pots_wanting_dish()
        out = [self._interact_one(i, action[:, i] == INTERACT, pots_wanting_dish) for i in range(2)]
        return tuple(torch.stack(parts, 1) for parts in zip(*out))  # type: ignore[return-value]

    def _interact_one(self, i: int, act: torch.Tensor, pots_wanting_dish: torch.Tensor
                      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Cook ``i``'s interact where ``act`` (bool ``[N]``); its delivery reward, shaped reward, served flag.
        ``pots_wanting_dish``: int64 ``[N]``, from :meth:`_pots_wanting_dish` before either cook acted."""
        tgt = self._pos[:, i] + self._delta[self._ori[:, i]]  # [N] the faced cell
        flat = tgt + self._row_start  # [N] the faced cell in the flattened [N * C] per-cell tensors
        h, hr = self._held[:, i].clone(), self._held_rec[:, i].clone()
        o, r, tk = (x.take(flat) for x in (self._obj, self._rec, self._tick))
        ev = self._events(act, self._terrain[tgt], h, o, r, tk)
        ev["useful_dish"] = ev["dish"] & self._dish_pickup_useful(pots_wanting_dish)
        sparse = torch.where(ev["serve"], self._rec_value[hr], 0.0)
        sh = self._shaping
        shaped = (ev["add"] * sh["PLACEMENT_IN_POT_REW"] + ev["useful_dish"] * sh["DISH_PICKUP_REWARD"]
                  + ev["ladle"] * sh["SOUP_PICKUP_REWARD"])
        self._apply(i, flat, ev, h, hr, o, r, tk)
        return sparse, shaped, ev["serve"]

    def _events(self, act: torch.Tensor, ter: torch.Tensor, h: torch.Tensor, o: torch.Tensor, r: torch.Tensor,
                tk: torch.Tensor) -> dict[str, torch.Tensor]:
        """What an interact does, bool ``[N]`` each, from the faced terrain ``ter``, the held object ``h`` and the
        faced cell's object ``o``, recipe ``r`` and tick ``tk`` (all ``[N]``); overcooked-ai's resolve_interacts."""
        free = h == NONE
        soup_here, idle = o == SOUP, tk < 0
        count = self._rec_count[r]
        ready = soup_here & ~idle & (tk >= self._rec_time[r])
        at = lambda code: act & (ter == code)
        ev = {"drop": at(COUNTER) & ~free & (o == NONE), "pick": at(COUNTER) & free & (o != NONE),
              "onion": at(ONION_DISP) & free, "tomato": at(TOMATO_DISP) & free, "dish": at(DISH_DISP) & free,
              "start": at(POT) & free & soup_here & idle & (count > 0) & (not self.old_dynamics),
              "ladle": at(POT) & (h == DISH) & ready,
              "add": at(POT) & ((h == ONION) | (h == TOMATO))
              & ((o == NONE) | (soup_here & idle & (count < MAX_INGREDIENTS))),
              "serve": at(SERVE) & (h == SOUP)}
        return ev

    def _apply(self, i: int, flat: torch.Tensor, ev: dict[str, torch.Tensor], h: torch.Tensor, hr: torch.Tensor,
               o: torch.Tensor, r: torch.Tensor, tk: torch.Tensor) -> None:
        """Write cook ``i``'s held object and the faced cell (``flat``) after the events ``ev``."""
        new_h = torch.where(ev["drop"] | ev["add"] | ev["serve"], NONE, h)
        new_h = torch.where(ev["pick"], o, new_h)
        for name, code in (("ladle", SOUP), ("onion", ONION), ("tomato", TOMATO), ("dish", DISH)):
            new_h = torch.where(ev[name], code, new_h)
        cleared = ev["pick"] | ev["ladle"]
        self._held[:, i] = new_h
        self._held_rec[:, i] = torch.where(cleared, r, hr).masked_fill(new_h != SOUP, 0)
        drop, add = ev["drop"], ev["add"]
        self._obj.put_(flat, torch.where(drop, h, torch.where(add, SOUP, o)).masked_fill(cleared, NONE))
        self._rec.put_(flat, torch.where(drop, hr, torch.where(add, r + self._add_step[h], r)).masked_fill(cleared, 0))
        # a soup put down keeps the tick it finished cooking at, which is its recipe's cook time
        dropped_tick = torch.where(h == SOUP, self._rec_time[hr], -1)
        self._tick.put_(flat, torch.where(drop, dropped_tick, tk).masked_fill(cleared, -1).masked_fill(ev["start"], 0))

    def _pots_wanting_dish(self) -> torch.Tensor:
        """int64 ``[N]``: pots cooking, ready or partly filled (an idle full pot does not count)."""
        obj, rec, tick = (x[:, self._pots] for x in (self._obj, self._rec, self._tick))  # [N, P]
        full_idle = (tick < 0) & (self._rec_count[rec] >= MAX_INGREDIENTS)
        return ((obj == SOUP) & ~full_idle).sum(1)

    def _dish_pickup_useful(self, pots_wanting_dish: torch.Tensor) -> torch.Tensor:
        """overcooked-ai's ``is_dish_pickup_useful``, bool ``[N]``: no dish on a counter and fewer dishes in
        hand than ``pots_wanting_dish`` (counted before either cook acted, as overcooked-ai does)."""
        dishes_held = (self._held == DISH).sum(1)
        no_counter_dish = ~((self._obj == DISH) & ~self._is_pot).any(1)
        return no_counter_dish & (dishes_held < pots_wanting_dish)

    def _move(self, action: torch.Tensor) -> None:
        """Moves and turns; cooks that would share a cell or swap stay where they were."""
        moving = action < STAY
        cand = self._pos + self._delta[action]
        new = torch.where(moving & (self._terrain[cand] == FLOOR), cand, self._pos)
        self._ori = torch.where(moving, action, self._ori)
        old = self._pos
        clash = (new[:, 0] == new[:, 1]) | ((new[:, 0] == old[:, 1]) & (new[:, 1] == old[:, 0]))
        self._pos = torch.where(clash.unsqueeze(1), old, new)

    def _cook(self) -> None:
        """Every cooking soup (started, not yet at its cook time) advances one tick; with ``old_dynamics`` a
        full idle pot starts first."""
        tick = self._tick[:, self._pots]
        rec = self._rec[:, self._pots]
        if self.old_dynamics:
            full = (self._obj[:, self._pots] == SOUP) & (tick < 0) & (self._rec_count[rec] == MAX_INGREDIENTS)
            tick = tick.masked_fill(full, 0)
        cooking = (tick >= 0) & (tick < self._rec_time[rec])
        self._tick[:, self._pots] = tick + cooking

    # ------------------------------------------------------------------ observation

    def _observe(self) -> Obs:
        """``lossless_state_encoding`` of both cooks: ``state`` ``[N, W*H*26]``, ``obs`` ``[N, 2, W*H*26]``.

        Built in place in its final ``[N, 2, C, 26]`` order (cells ``x * H + y``): the terrain template, the
        object planes shared by both views, then a one at each cook's cell and facing plane."""
        n, c = self.num_envs, self._terrain.numel()
        out = self._template.expand(n, 2, c, N_PLANES).clone()
        out[:, :, :, 16:25] = self._object_planes().unsqueeze(1)
        out[:, :, :, 25] = (self.horizon - self._t < URGENCY_STEPS).float().view(n, 1, 1)
        pos, ori = self._pos[:, self._perm] * N_PLANES, self._ori[:, self._perm]  # [N, 2(view), 2(self, other)]
        idx = torch.cat([pos + self._loc_plane, pos + self._facing_plane + ori], 2)  # [N, 2, 4]
        obs = out.view(n, 2, self.obs_dim).scatter_(2, idx, 1.0)
        return {"state": obs[:, 0], "obs": obs}

    def _object_planes(self) -> torch.Tensor:
        """Planes 16..24 of the encoding, float32 ``[N, C, 9]``: onions/tomatoes in an idle pot, onions/tomatoes
        in a soup, cook time left, soup done, dishes, onions, tomatoes (held objects at their cook's cell)."""
        obj, rec, tick = self._obj, self._rec, self._tick
        soup = obj == SOUP
        in_pot = soup & self._is_pot
        idle_pot = in_pot & (tick < 0)
        onions, tomatoes = self._rec_onions[rec], self._rec_tomatoes[rec]
        time = self._rec_time[rec]
        planes = torch.stack([
            onions * idle_pot, tomatoes * idle_pot,
            onions * (soup & ~idle_pot), tomatoes * (soup & ~idle_pot),
            (time - tick).float() * (in_pot & ~idle_pot),
            (soup & (~self._is_pot | (tick >= time))).float(),
            (obj == DISH).float(), (obj == ONION).float(), (obj == TOMATO).float()], 2)
        h, hr = self._held, self._held_rec
        hsoup = (h == SOUP).float()
        zero = torch.zeros_like(hsoup)
        held = torch.stack([zero, zero, self._rec_onions[hr] * hsoup, self._rec_tomatoes[hr] * hsoup,
                            zero, hsoup, (h == DISH).float(), (h == ONION).float(), (h == TOMATO).float()], 2)
        return planes.scatter_add_(1, self._pos.unsqueeze(2).expand(-1, -1, 9), held)  # held: [N, 2, 9]
