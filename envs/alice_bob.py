"""Alice_and_Bob: a cooperative two-agent grid world with coloured buttons and diamonds, batched.

A tensor reimplementation of the sparse-reward **Alice_and_Bob** task used to evaluate HMASD
(Yang et al., "Hierarchical Multi-Agent Skill Discovery", NeurIPS 2023): two agents, Alice and
Bob, move on a grid with walls that holds a red and a blue button and a red and a blue diamond.
A diamond can only be collected while an agent stands on the button of its colour, and the team is
rewarded only when both diamonds have been collected. ``N`` independent grids are stepped at once;
everything is a tensor with a leading batch dimension (no Python loop over envs or agents).

What comes from the paper and what is ours
    The paper (as far as its text could be consulted for this port: title, abstract and
    introduction; its environment section, figure and appendix were not available) fixes only
    the game: two cooperating agents, a grid with walls, red/blue buttons and diamonds, a diamond
    collectable only while an agent holds the button of its colour, a sparse team reward given
    only when both diamonds are collected, global state plus per-agent observations. Everything
    below that is not in that sentence is a choice of this module, made to keep the game
    faithful in spirit, fully batched and cheap; each is marked *(choice)*. The maps in
    particular are ours, not the paper's figure.

Map *(choice)*
    An ASCII layout: ``#`` wall, ``.`` or space floor, ``r``/``b`` the red/blue button,
    ``R``/``B`` the red/blue diamond, ``1``/``2`` Alice's/Bob's start cell (floor). Exactly one of
    each object; buttons and diamonds occupy distinct cells, so one agent can never hold a button
    and collect its diamond alone. Built-in ``size`` variants (all "crossed": the room with the red
    button holds the blue diamond and vice versa, so in the natural division of labour each agent
    presses one button and collects one diamond):

    * ``"small"`` (5 x 7, two 3 x 2 rooms joined by a door; optimum 5 steps) for fast tests;
    * ``"default"`` (10 x 13, a start hall above two 5 x 5 rooms reached through one door each;
      optimum 19 steps): the reference layout of this module;
    * ``"large"`` (14 x 19, the same plan with 8 x 8 rooms, a wall segment in each; optimum 32).

    (Optima: shortest joint plans, found by breadth-first search over the joint state.)

    ``layout=`` takes any such map (a string with newlines or a sequence of rows) instead.
Actions *(choice)*
    ``AgentDiscrete(5, 2)``, int64 ``[N, 2]`` (Alice, Bob): ``0`` stay, ``1`` up, ``2`` down,
    ``3`` left, ``4`` right. Both agents move simultaneously; a move into a wall or off the grid
    leaves the agent where it is. Agents do not block each other (they may share a cell).
    Out-of-range actions raise ``ValueError`` on CPU; on accelerators they are not checked (that
    would synchronise with the host) and give undefined moves.
Diamond rule
    After the moves, the red diamond is collected if it is still there, some agent stands on it and
    some agent stands on the red button (necessarily the other agent); the same for blue. The rule
    looks at the state after the move, so an agent may wait on a diamond until its partner reaches
    the button. A collected diamond disappears for the rest of the episode *(choice: the diamond
    stays collected once the button is released)*.
Reward *(paper: sparse team reward on collecting both; value ours)*
    ``success_reward`` (default ``1.0``) on the step on which the second diamond is collected,
    ``0`` on every other step; no shaping, no step penalty. One team reward ``[N]`` float32.
Termination *(choice)*
    ``terminated`` when both diamonds are collected (``info["success"]``); ``truncated`` after
    ``max_episode_steps`` steps (default per layout: 30 small, 100 default, 200 large; ``None``
    disables it). As with Gymnasium's ``TimeLimit`` both can be set on one step; terminated wins.
    ``info`` (bool ``[N]``, valid where done): ``success``, ``red_collected``, ``blue_collected``.
Start state *(choice)*
    Agents start on the ``1``/``2`` cells of the map (``random_start=False``, the default; the env
    is then deterministic and the generator unused), or, with ``random_start=True``, on two distinct
    uniformly drawn floor cells that hold no button or diamond. With ``random_start_episodes=K``
    only the first ``K`` episodes of each env index start at random and the later ones on the
    map's cells: exploring starts as a curriculum, so that training ends on the task's own start.
    The count is per env object (kept in ``state_dict``, not cleared by ``reset``). No diamond is
    collected at start.
Global state ``"state"`` *(choice)*, float32 ``[N, 7]``, all in ``[0, 1]``
    Alice's (row, col), Bob's (row, col), each divided by (H - 1, W - 1); red collected; blue
    collected; elapsed fraction of the time limit ``steps / max_episode_steps`` (0 without one).
    The map itself is constant per env instance, so positions and flags are the full state.
Per-agent observations ``"obs"`` *(choice)*, float32 ``[N, 2, O]``, all in ``[0, 1]``
    An egocentric ``K x K`` window (``K = 2 * view_radius + 1``, default radius 2, i.e. 5 x 5)
    centred on the agent, six channels, each ``K * K`` values row-major, channel after channel:
    wall (cells off the grid count as wall), red button, blue button, red diamond (not yet
    collected), blue diamond (not yet collected), the other agent (only where it is inside the
    window; at the centre when both share a cell). Then six scalars: own (row, col) normalised as
    in the state (0, 0 with ``own_position=False``), red collected, blue collected, and the agent's one-hot id (Alice, Bob).
    ``O = 6 * K * K + 6`` (156 for the default radius). The teammate's position beyond the window
    is not observed; the collected flags are (the diamonds are in plain sight in the game).
Auto-reset
    ``SAME_STEP`` (see :mod:`rl_system.envs.base`): finished envs restart in the same step (only those env
    indices); ``final_obs`` is the observation of the ended episode. Randomness (``random_start``)
    comes from one ``torch.Generator`` on the env's device (``seed`` makes the batch
    reproducible; different devices draw different numbers).

Implementation notes: positions are flat cell indices; a move is one ``take`` from a precomputed
``[cells, 5]`` move table; the diamond rule is a bitwise OR of the cell "kinds" under the two
agents and a 16-entry lookup; every per-agent observation is one row of a precomputed table
indexed by (agent, cell, collected flags), gathered with a single ``index_select`` straight into
the output, plus one ``scatter_add_`` for the teammate channel. On CPU finished envs are found
with ``nonzero`` (free there); on accelerators the reset is blended in with ``torch.where`` so
``step`` never synchronises with the host. Returned tensors are fresh each step (the env never
writes to them afterwards); where nothing ended ``obs`` and ``final_obs`` are the same tensors.

:func:`oracle_actions` is a scripted, batched policy that solves any valid layout (Alice presses
red then collects blue, Bob collects red then presses blue, each along BFS shortest paths); the
tests use it to prove solvability and the benchmark to exercise frequent resets.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

import torch
import torch.nn.functional as F

from rl_system.envs.base import AgentDiscrete, Obs, StepResult, TensorSpec, VecEnv, make_generator

AGENT_NAMES = ("alice", "bob")
N_ACTIONS = 5
STAY, UP, DOWN, LEFT, RIGHT = range(N_ACTIONS)
ACTION_DELTAS = ((0, 0), (-1, 0), (1, 0), (0, -1), (0, 1))  # (d_row, d_col) per action
STATE_DIM = 7
N_CHANNELS = 6  # wall, red button, blue button, red diamond, blue diamond, other agent
N_SCALARS = 6  # own row, own col, red collected, blue collected, is_alice, is_bob

# Cell kinds as bits; the union of the kinds under both agents decides what gets collected.
RED_BUTTON, BLUE_BUTTON, RED_DIAMOND, BLUE_DIAMOND = 1, 2, 4, 8
RED_FLAG, BLUE_FLAG = 1, 2  # bits of the per-env "collected" code

LAYOUTS: dict[str, tuple[str, ...]] = {
    "small": (
        "#######",
        "#r1#2b#",
        "#.....#",
        "#B.#.R#",
        "#######",
    ),
    "default": (
        "#############",
        "#1.........2#",
        "#...........#",
        "##.#######.##",
        "#r....#....b#",
        "#.....#.....#",
        "#.....#.....#",
        "#.....#.....#",
        "#....B#R....#",
        "#############",
    ),
    "large": (
        "###################",
        "#1...............2#",
        "#.................#",
        "#.................#",
        "###.###########.###",
        "#r.......#.......b#",
        "#........#........#",
        "#..####..#..####..#",
        "#........#........#",
        "#........#........#",
        "#........#........#",
        "#........#........#",
        "#.......B#R.......#",
        "###################",
    ),
}
DEFAULT_MAX_STEPS = {"small": 30, "default": 100, "large": 200}
_OBJECT_BITS = {"r": RED_BUTTON, "b": BLUE_BUTTON, "R": RED_DIAMOND, "B": BLUE_DIAMOND}


def parse_layout(layout: str | Sequence[str]) -> tuple[list[str], dict[str, tuple[int, int]]]:
    """Validate an ASCII map; returns its rows and the (row, col) of ``r b R B 1 2``."""
    rows = layout.strip("\n").split("\n") if isinstance(layout, str) else list(layout)
    if not rows or any(len(r) != len(rows[0]) for r in rows):
        raise ValueError("layout must be a non-empty rectangle of equal-length rows")
    if len(rows) < 2 or len(rows[0]) < 2:
        raise ValueError("layout must be at least 2 x 2")
    where: dict[str, list[tuple[int, int]]] = {ch: [] for ch in "rbRB12"}
    for i, row in enumerate(rows):
        for j, ch in enumerate(row):
            if ch in where:
                where[ch].append((i, j))
            elif ch not in "#. ":
                raise ValueError(f"layout: unknown character {ch!r} at row {i}, col {j}")
    for ch, cells in where.items():
        if len(cells) != 1:
            raise ValueError(f"layout must contain exactly one {ch!r}, found {len(cells)}")
    return rows, {ch: cells[0] for ch, cells in where.items()}


def _bfs(rows: list[str], source: tuple[int, int]) -> dict[tuple[int, int], int]:
    """Shortest-path distances (4-neighbour moves over non-wall cells) from ``source``."""
    h, w = len(rows), len(rows[0])
    dist = {source: 0}
    queue = deque([source])
    while queue:
        i, j = queue.popleft()
        for di, dj in ACTION_DELTAS[1:]:
            ni, nj = i + di, j + dj
            if 0 <= ni < h and 0 <= nj < w and rows[ni][nj] != "#" and (ni, nj) not in dist:
                dist[(ni, nj)] = dist[(i, j)] + 1
                queue.append((ni, nj))
    return dist


class AliceBobVecEnv(VecEnv):
    """``num_envs`` Alice_and_Bob grids as tensors on ``device``; see the module docstring.

    Parameters
        num_envs: batch size ``N``.
        device, seed: where the tensors live; the generator seed (only used by ``random_start``).
        size: built-in map, ``"small"``, ``"default"`` or ``"large"``.
        layout: a custom ASCII map (overrides ``size``).
        max_episode_steps: time limit; ``"auto"`` takes the map's default (30/100/200, 100 for a
            custom map), ``None`` disables truncation.
        view_radius: radius of the egocentric observation window (``K = 2 r + 1``), ``>= 0``.
        random_start: draw start cells at random instead of using the map's ``1``/``2``.
        random_start_episodes: with ``random_start``, only each env index's first this many
            episodes start at random (``None``: all of them); ignored without ``random_start``.
        own_position: include the agent's own (row, col) in its observation; ``False`` leaves
            those two scalars at 0, so an agent knows where it is only from its window (and memory).
        success_reward: team reward on the step both diamonds are collected.
    """

    num_agents = 2
    agent_names = AGENT_NAMES

    def __init__(self, num_envs: int, device: str | torch.device = "cpu", seed: int | None = None, *,
                 size: str = "default", layout: str | Sequence[str] | None = None,
                 max_episode_steps: int | None | str = "auto", view_radius: int = 2,
                 random_start: bool = False, random_start_episodes: int | None = None,
                 own_position: bool = True, success_reward: float = 1.0) -> None:
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        if layout is None:
            if size not in LAYOUTS:
                raise ValueError(f"size must be one of {sorted(LAYOUTS)}, got {size!r}")
            layout = LAYOUTS[size]
            default_steps = DEFAULT_MAX_STEPS[size]
        else:
            size, default_steps = "custom", 100
        if max_episode_steps == "auto":
            max_episode_steps = default_steps
        if max_episode_steps is not None and (isinstance(max_episode_steps, str) or max_episode_steps < 1):
            raise ValueError(f"max_episode_steps must be >= 1, None or 'auto', got {max_episode_steps!r}")
        if view_radius < 0:
            raise ValueError(f"view_radius must be >= 0, got {view_radius}")
        if random_start_episodes is not None and random_start_episodes < 0:
            raise ValueError(f"random_start_episodes must be >= 0 or None, got {random_start_episodes!r}")
        rows, where = parse_layout(layout)
        for ch in "rRbB2":
            if where[ch] not in _bfs(rows, where["1"]):
                raise ValueError(f"layout: {ch!r} at {where[ch]} is not reachable from Alice's start")

        self.num_envs = int(num_envs)
        self.device = torch.device(device)
        self.size = size
        self.layout = tuple(rows)
        self.height, self.width = len(rows), len(rows[0])
        self.max_episode_steps = max_episode_steps
        self.view_radius = int(view_radius)
        self.random_start = bool(random_start)
        self.random_start_episodes = random_start_episodes
        self.own_position = bool(own_position)
        self.success_reward = float(success_reward)
        self.view_size = 2 * self.view_radius + 1
        self.obs_dim = N_CHANNELS * self.view_size ** 2 + N_SCALARS
        self.action_spec = AgentDiscrete(N_ACTIONS, self.num_agents)
        self.observation_spec = {
            "state": TensorSpec((STATE_DIM,), torch.float32, 0.0, 1.0),
            "obs": TensorSpec((self.num_agents, self.obs_dim), torch.float32, 0.0, 1.0),
        }
        self._where = where
        self._cell = {ch: i * self.width + j for ch, (i, j) in where.items()}
        self._generator = make_generator(self.device, seed)
        self._sync_free_reset = self.device.type != "cpu"
        self._build_tables(rows)

        n, dev = self.num_envs, self.device
        self._pos = torch.zeros((n, 2), dtype=torch.int64, device=dev)  # flat cell index per agent
        self._flags = torch.zeros(n, dtype=torch.int64, device=dev)  # RED_FLAG | BLUE_FLAG bits
        self._steps = torch.zeros(n, dtype=torch.int64, device=dev)
        self._episodes = torch.zeros(n, dtype=torch.int64, device=dev)  # episodes begun per env index
        self._needs_reset = True
        self._oracle: torch.Tensor | None = None

    # ------------------------------------------------------------------ tables

    def _build_tables(self, rows: list[str]) -> None:
        h, w, dev = self.height, self.width, self.device
        cells = h * w
        wall = torch.tensor([[ch == "#" for ch in row] for row in rows], dtype=torch.bool)
        kind = torch.zeros(cells, dtype=torch.int64)
        for ch, bit in _OBJECT_BITS.items():
            kind[self._cell[ch]] = bit
        # Move table [cells, 5]: the cell an agent ends on; walls and the grid edge block.
        ii, jj = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
        ii, jj = ii.reshape(-1), jj.reshape(-1)
        move = torch.empty((cells, N_ACTIONS), dtype=torch.int64)
        for a, (di, dj) in enumerate(ACTION_DELTAS):
            ni, nj = ii + di, jj + dj
            inside = (ni >= 0) & (ni < h) & (nj >= 0) & (nj < w)
            target = ni.clamp(0, h - 1) * w + nj.clamp(0, w - 1)
            blocked = ~inside | wall.reshape(-1)[target]
            move[:, a] = torch.where(blocked, torch.arange(cells), target)
        self._move = move.reshape(-1).to(dev)  # index: cell * 5 + action
        self._kind = kind.to(dev)
        # Collected-flag bits set by each union of kinds under the two agents (16 entries).
        u = torch.arange(16)
        newly = torch.where((u & (RED_BUTTON | RED_DIAMOND)) == (RED_BUTTON | RED_DIAMOND), RED_FLAG, 0)
        newly |= torch.where((u & (BLUE_BUTTON | BLUE_DIAMOND)) == (BLUE_BUTTON | BLUE_DIAMOND), BLUE_FLAG, 0)
        self._collect = newly.to(dev)

        # Observation table [2 agents * cells * 4 flag codes, O].
        r, k = self.view_radius, self.view_size
        kk = k * k
        planes = torch.zeros((1, N_CHANNELS - 1, h, w))
        planes[0, 0] = wall.float()
        for c, ch in enumerate("rbRB", start=1):
            i, j = self._where[ch]
            planes[0, c, i, j] = 1.0
        padded = F.pad(planes, (r, r, r, r))
        padded[0, 0, :, :r] = 1.0  # off-grid cells read as wall
        padded[0, 0, :, padded.shape[-1] - r:] = 1.0
        padded[0, 0, :r, :] = 1.0
        padded[0, 0, padded.shape[-2] - r:, :] = 1.0
        windows = F.unfold(padded, kernel_size=k)[0].T  # [cells, 5 * kk], channel-major
        scale = torch.tensor([max(h - 1, 1), max(w - 1, 1)], dtype=torch.float32)
        pos_norm = torch.stack([ii, jj], 1).float() / scale  # [cells, 2]
        table = torch.zeros((2, cells, 4, self.obs_dim))
        for flags in range(4):
            view = windows.clone()
            if flags & RED_FLAG:
                view[:, 3 * kk:4 * kk] = 0.0
            if flags & BLUE_FLAG:
                view[:, 4 * kk:5 * kk] = 0.0
            table[:, :, flags, :5 * kk] = view
            if self.own_position:
                table[:, :, flags, 6 * kk:6 * kk + 2] = pos_norm
            table[:, :, flags, 6 * kk + 2] = float(bool(flags & RED_FLAG))
            table[:, :, flags, 6 * kk + 3] = float(bool(flags & BLUE_FLAG))
        table[0, :, :, 6 * kk + 4] = 1.0
        table[1, :, :, 6 * kk + 5] = 1.0
        self._obs_table = table.reshape(-1, self.obs_dim).to(dev)
        self._agent_row_base = torch.tensor([0, cells * 4], dtype=torch.int64, device=dev)
        # Teammate channel: column of the other agent inside my window (own cell * cells + other cell).
        di = ii[None, :] - ii[:, None]
        dj = jj[None, :] - jj[:, None]
        visible = (di.abs() <= r) & (dj.abs() <= r)
        column = 5 * kk + (di + r).clamp(0, k - 1) * k + (dj + r).clamp(0, k - 1)
        self._rel_col = column.reshape(-1).to(dev)
        self._rel_vis = visible.reshape(-1).float().to(dev)
        self._pos_norm = pos_norm.to(dev)
        self._cells = cells

        starts = torch.tensor([self._cell["1"], self._cell["2"]], dtype=torch.int64)
        self._start = starts.to(dev)
        self._wall = wall.reshape(-1).to(dev)
        reachable = torch.zeros(cells, dtype=torch.bool)
        for i, j in _bfs(rows, self._where["1"]):
            reachable[i * w + j] = True
        # Candidates for random starts: floor cells reachable from the map's start, no object on them.
        self._spawn_cells = torch.nonzero(reachable & (kind == 0)).squeeze(1).to(dev)
        if self._spawn_cells.numel() < 2:
            raise ValueError("layout needs at least two free floor cells")
        inv = 0.0 if self.max_episode_steps is None else 1.0 / self.max_episode_steps
        self._inv_max_steps = torch.tensor(inv, dtype=torch.float32, device=dev)
        self._reward_value = torch.tensor(self.success_reward, dtype=torch.float32, device=dev)

    # ------------------------------------------------------------------ public API

    def reset(self, seed: int | None = None) -> Obs:
        """Reset all envs; ``seed`` reseeds the generator (else it continues its stream)."""
        if seed is not None:
            self._generator.manual_seed(seed)
        self._pos.copy_(self._draw_starts(None))
        self._episodes += 1
        self._flags.zero_()
        self._steps.zero_()
        self._needs_reset = False
        return self._observe(self._pos, self._flags, self._steps)

    def set_state(self, positions: torch.Tensor, collected: torch.Tensor | None = None,
                  steps: torch.Tensor | None = None) -> Obs:
        """Place the agents at ``positions`` (int ``[N, 2, 2]``: agent, (row, col)) with the
        diamonds ``collected`` (bool ``[N, 2]``: red, blue; default none) and episode step counters
        ``steps`` (default 0); returns the observation. Both diamonds collected is not allowed."""
        positions = torch.as_tensor(positions, device=self.device).long()
        if tuple(positions.shape) != (self.num_envs, 2, 2):
            raise ValueError(f"positions must have shape ({self.num_envs}, 2, 2), got {tuple(positions.shape)}")
        rows, cols = positions[..., 0], positions[..., 1]
        if ((rows < 0) | (rows >= self.height) | (cols < 0) | (cols >= self.width)).any():
            raise ValueError("positions outside the grid")
        cell = rows * self.width + cols
        if self._wall[cell].any():
            raise ValueError("positions on a wall")
        flags = torch.zeros(self.num_envs, dtype=torch.int64, device=self.device)
        if collected is not None:
            collected = torch.as_tensor(collected, device=self.device).bool()
            flags = collected[:, 0].long() * RED_FLAG + collected[:, 1].long() * BLUE_FLAG
            if (flags == RED_FLAG | BLUE_FLAG).any():
                raise ValueError("both diamonds collected is a finished episode; not a valid state")
        self._pos.copy_(cell)
        self._flags.copy_(flags)
        self._steps.copy_(torch.zeros_like(self._steps) if steps is None else torch.as_tensor(steps))
        self._needs_reset = False
        return self._observe(self._pos, self._flags, self._steps)

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {"pos": self._pos.clone(), "flags": self._flags.clone(), "steps": self._steps.clone(),
                "episodes": self._episodes.clone(), "generator": self._generator.get_state()}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        for key in ("pos", "flags", "steps", "episodes"):
            if key not in state:  # (states saved before random_start_episodes have no "episodes")
                continue
            if tuple(state[key].shape) != tuple(getattr(self, f"_{key}").shape):
                raise ValueError(f"state[{key!r}] has shape {tuple(state[key].shape)}, "
                                 f"expected {tuple(getattr(self, f'_{key}').shape)}")
        self._pos.copy_(state["pos"])
        self._flags.copy_(state["flags"])
        self._steps.copy_(state["steps"])
        if "episodes" in state:
            self._episodes.copy_(state["episodes"])
        self._generator.set_state(state["generator"])
        self._needs_reset = False

    @property
    def positions(self) -> torch.Tensor:
        """A copy of the agents' cells as (row, col), int64 ``[N, 2, 2]``."""
        return torch.stack([self._pos // self.width, self._pos % self.width], dim=-1)

    @property
    def collected(self) -> torch.Tensor:
        """A copy of the collected flags (red, blue), bool ``[N, 2]``."""
        return torch.stack([(self._flags & RED_FLAG) != 0, (self._flags & BLUE_FLAG) != 0], dim=1)

    @property
    def episode_steps(self) -> torch.Tensor:
        """A copy of the per-env step counters of the current episodes, int64 ``[N]``."""
        return self._steps.clone()

    def step(self, action: torch.Tensor) -> StepResult:
        action = self._step_action(action)
        if self.device.type == "cpu":
            lo, hi = torch.aminmax(action)
            if lo < 0 or hi >= N_ACTIONS:
                raise ValueError(f"actions must be in [0, {N_ACTIONS}), got values in [{int(lo)}, {int(hi)}]")

        # Move: one gather from the [cells, 5] move table for both agents.
        idx = self._pos * N_ACTIONS
        idx += action
        pos = torch.take(self._move, idx)
        self._pos = pos
        # Diamond rule on the union of the cell kinds under the two agents.
        kinds = torch.take(self._kind, pos)
        union = kinds[:, 0] | kinds[:, 1]
        self._flags |= torch.take(self._collect, union)
        flags = self._flags
        terminated = flags == (RED_FLAG | BLUE_FLAG)
        self._steps += 1
        if self.max_episode_steps is None:
            truncated = torch.zeros_like(terminated)
        else:
            truncated = self._steps >= self.max_episode_steps
        done = terminated | truncated
        info = {"success": terminated, "red_collected": (flags & RED_FLAG) != 0,
                "blue_collected": (flags & BLUE_FLAG) != 0}
        reward = terminated.to(torch.float32)
        reward *= self._reward_value

        final_obs = self._observe(pos, flags, self._steps)
        obs = final_obs
        if self._sync_free_reset:
            fresh = self._draw_starts(None)
            torch.where(done.unsqueeze(1), fresh, self._pos, out=self._pos)
            self._episodes += done
            self._flags.masked_fill_(done, 0)
            self._steps.masked_fill_(done, 0)
            obs = self._observe(self._pos, self._flags, self._steps)
        else:
            env_idx = done.nonzero().squeeze(1)
            if env_idx.numel():
                self._pos.index_copy_(0, env_idx, self._draw_starts(env_idx))
                self._episodes.index_add_(0, env_idx, torch.ones_like(env_idx))
                self._flags.index_fill_(0, env_idx, 0)
                self._steps.index_fill_(0, env_idx, 0)
                obs = self._observe(self._pos, self._flags, self._steps)
        return StepResult(obs, reward, terminated, truncated, final_obs, info)

    def oracle_actions(self) -> torch.Tensor:
        """Actions ``[N, 2]`` of a scripted policy that solves the map: while red is not collected
        Alice walks to the red button and Bob to the red diamond, then Alice walks to the blue
        diamond and Bob to the blue button, each along a BFS shortest path (stay when there)."""
        if self._oracle is None:
            self._oracle = self._build_oracle()
        red_done = (self._flags & RED_FLAG) != 0
        # Targets 0..3 = red button, red diamond, blue diamond, blue button.
        target = torch.stack([torch.where(red_done, 2, 0), torch.where(red_done, 3, 1)], dim=1)
        return torch.take(self._oracle, target * self._cells + self._pos)

    def ascii(self, index: int = 0) -> str:
        """The map of env ``index`` as text: ``A``/``C`` Alice/Bob (``@`` when they share a
        cell), collected diamonds removed."""
        grid = [list(row.replace("1", ".").replace("2", ".").replace(" ", ".")) for row in self.layout]
        flags = int(self._flags[index])
        for ch, bit in (("R", RED_FLAG), ("B", BLUE_FLAG)):
            if flags & bit:
                i, j = self._where[ch]
                grid[i][j] = "."
        (ai, aj), (bi, bj) = self.positions[index].tolist()
        grid[ai][aj] = "A"
        grid[bi][bj] = "@" if (ai, aj) == (bi, bj) else "C"
        return "\n".join("".join(row) for row in grid)

    # ------------------------------------------------------------------ internals

    def _draw_starts(self, env_idx: torch.Tensor | None) -> torch.Tensor:
        """Start cells ``[count, 2]`` for the episodes beginning at ``env_idx`` (``None``: every
        env): the map's, or two distinct random spawn cells (with ``random_start_episodes``, only
        where the env index has begun fewer episodes than that)."""
        count = self.num_envs if env_idx is None else env_idx.numel()
        if not self.random_start:
            return self._start.expand(count, 2).clone()
        m = self._spawn_cells.numel()
        first = torch.randint(0, m, (count,), generator=self._generator, device=self.device)
        second = torch.randint(0, m - 1, (count,), generator=self._generator, device=self.device)
        second += (second >= first).long()
        drawn = self._spawn_cells[torch.stack([first, second], dim=1)]
        if self.random_start_episodes is None:
            return drawn
        begun = self._episodes if env_idx is None else self._episodes[env_idx]
        return torch.where((begun < self.random_start_episodes).unsqueeze(1), drawn, self._start)

    def _observe(self, pos: torch.Tensor, flags: torch.Tensor, steps: torch.Tensor) -> Obs:
        """Fresh ``{"state": [N, 7], "obs": [N, 2, O]}`` for the given (batched) state."""
        n = pos.shape[0]
        rows = pos * 4
        rows += flags.unsqueeze(1)
        rows += self._agent_row_base
        obs = torch.empty((n, 2, self.obs_dim), dtype=torch.float32, device=self.device)
        flat = obs.view(n * 2, self.obs_dim)
        torch.index_select(self._obs_table, 0, rows.view(-1), out=flat)
        # Row of (my cell, teammate's cell) in the relative-position tables: the teammate's cell
        # is (sum of both cells) - mine.
        pair = pos * (self._cells - 1)
        pair += pos.sum(1, keepdim=True)
        pair = pair.view(-1, 1)
        flat.scatter_add_(1, torch.take(self._rel_col, pair), torch.take(self._rel_vis, pair))
        state = torch.empty((n, STATE_DIM), dtype=torch.float32, device=self.device)
        state[:, :4] = torch.index_select(self._pos_norm, 0, pos.view(-1)).view(n, 4)
        state[:, 4] = flags & RED_FLAG
        state[:, 5] = flags >= BLUE_FLAG
        torch.mul(steps, self._inv_max_steps, out=state[:, 6])
        return {"state": state, "obs": obs}

    def _build_oracle(self) -> torch.Tensor:
        """``[4 targets * cells]`` action table: the first move of a shortest path to the target."""
        rows = list(self.layout)
        table = torch.zeros((4, self._cells), dtype=torch.int64)
        for t, ch in enumerate("rRBb"):
            dist = _bfs(rows, self._where[ch])
            for (i, j), d in dist.items():
                if d == 0:
                    continue
                for a, (di, dj) in enumerate(ACTION_DELTAS[1:], start=1):
                    if dist.get((i + di, j + dj), -1) == d - 1:
                        table[t, i * self.width + j] = a
                        break
        return table.reshape(-1).to(self.device)


def oracle_actions(env: AliceBobVecEnv) -> torch.Tensor:
    """The scripted solver's actions for every env of ``env`` (see :meth:`AliceBobVecEnv.oracle_actions`)."""
    return env.oracle_actions()
