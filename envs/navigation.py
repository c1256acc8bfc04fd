"""Lidar navigation (in the spirit of NavRL) as a batched torch environment.

``N`` point robots each fly, in their own randomly generated arena, from a start to a goal through
static obstacles (vertical cylinders standing on the floor) and moving obstacles (spheres and short
cylinders moving with constant velocity, bouncing off the arena walls). Everything is a tensor with
a leading batch dimension; the lidar ray-cast is one batched tensor expression (no Python loops
over envs, beams or obstacles).

World
    The arena is ``[0, arena]^2`` horizontally (metres), floor ``z = 0``, ceiling ``z = 5``.
    ``num_static`` cylinders per env: centre uniform in the arena, radius ``U(0.3, 1.0)``, height
    ``U(1, 4)``. ``num_dynamic`` moving obstacles per env: half spheres (radius ``U(0.3, 0.7)``),
    half short vertical cylinders (radius ``U(0.3, 0.7)``, half-height ``U(0.25, 0.5)``), centre
    height ``U(0.5, 3.5)``, horizontal speed ``U(0.5, 1.5)`` m/s in a random heading, vertical
    speed ``U(-0.2, 0.2)``; they bounce (velocity component flipped) at the arena walls and at
    ``z = 0.5 / 3.5``. ``dt`` is the control period (s); ``max_steps`` the time limit.
    The robot is a point with a collision radius of ``ROBOT_RADIUS = 0.2`` m.
Start / goal
    Start and goal lie on opposite sides of the arena centre (random heading, distance
    ``0.4 * arena`` from the centre each, plus ``±0.05 * arena`` jitter), heights ``U(1, 2.5)``.
    Static cylinders closer than ``1 m`` (surface) to the start or goal and moving obstacles within
    ``3 m`` of the start are resampled (8 vectorised rounds; a cylinder still in the way after
    that is removed, i.e. parked far outside the arena).
Goal frame
    Fixed per episode (as NavRL's ``target_dir``): ``x`` = horizontal direction from the start to
    the goal, ``z`` = up, ``y = z × x``. The lidar azimuths are in this frame too (beam 0 points
    along ``x``), so the whole observation is invariant to the world yaw.
Observation (all float32)
    ``state [8]``: unit vector from robot to goal in the goal frame (3), horizontal distance to
    the goal, vertical distance (goal z - robot z, signed), robot velocity in the goal frame (3).
    ``lidar [1, 36, 4]``: 36 horizontal beams (azimuth ``10° * k`` in the goal frame) × 4
    elevations (-10°, 0°, 10°, 20°); value = ``LIDAR_RANGE - hit distance`` clipped to
    ``[0, LIDAR_RANGE]`` with ``LIDAR_RANGE = 4`` m, i.e. 0 = nothing within range, larger =
    closer. Hit distance is measured along the 3D ray from the robot centre to the first of: a
    static cylinder (exact solid finite cylinder, side and top), the floor, the ceiling, an arena
    wall. Moving obstacles are not in the lidar (they have their own entry). The cast is exact
    (analytic ray-circle intersection in 2D plus a height window per elevation) and batched, but
    sparse rather than a dense ``[N, 144, num_static]`` tensor: only (env, cylinder) pairs within
    range and (pair, beam) candidates are evaluated (``nonzero`` + ``scatter_reduce``; on an
    accelerator the ``nonzero`` calls synchronise with the host).
    ``direction [2]``: the goal frame's ``x`` axis in the world frame (unit, horizontal).
    ``dynamic_obstacle [num_dynamic, 10]``: the moving obstacles sorted nearest first (3D centre
    distance), each row relative position in the goal frame (3), horizontal and vertical (abs)
    centre distance (2), relative velocity (obstacle - robot) in the goal frame (3), size
    (diameter, height) (2). Rows of obstacles farther than ``LIDAR_RANGE`` are all zeros.
Action
    ``Box(3)`` in ``[-1, 1]^3``: velocity command, scaled by ``MAX_SPEED = 2`` m/s per axis
    (clipped), in the goal frame (``x`` toward the goal, ``z`` up) by default: the env rotates it
    to the world frame with the episode's yaw, as NavRL's policy does with its ``direction``
    entry. ``action_frame="world"`` takes the command in the world frame instead: an MLP policy
    then has to learn the rotation from ``direction``, and learns more slowly (example config,
    3M steps: success 0.80 / collision 0.17 against 0.97 / 0.03 in the goal frame). The velocity
    follows the command with a first-order lag, ``v += (dt / TAU_V) * (v_cmd - v)``,
    ``TAU_V = 0.2`` s, then ``p += v * dt``.
Reward
    Per step: progress, the decrease of the 3D distance to the goal over the step (metres; the
    potential-based shaping ``d_{t-1} - d_t``, so it sums to start distance minus final distance
    and cannot be farmed by circling), ``+GOAL_REWARD = 10`` on reaching the goal,
    ``-COLLISION_PENALTY = 10`` on a collision. No time or velocity penalty: the discount
    (``gamma = 0.99`` in the example config) already makes the goal bonus worth more when reached
    sooner. A straight 16 m flight to the goal thus returns about ``16 + 10``; a collision after
    ``k`` metres of progress ``k - 10``.
Termination
    ``terminated`` on reaching the goal (3D distance ``< 0.5`` m, without colliding on that
    step) or on a collision: robot within ``ROBOT_RADIUS`` of a static cylinder (side or top), of
    a moving obstacle's surface, of the floor, or leaving the arena box (walls / ceiling).
    ``truncated`` after ``max_steps`` steps (may coincide with ``terminated``; terminated wins).
    ``info["success"]`` / ``info["collision"]`` (bool ``[N]``) are valid where done.
Parameters (constructor keywords, ``env.kwargs`` in a run config)
    ``num_static=16`` cylinders and ``num_dynamic=5`` moving obstacles per env: the difficulty
    (with the defaults, flying straight at the goal succeeds in ~40% of the episodes, uniform
    random actions in none; ``python bench/bench_navigation.py --baselines``). ``arena=20``
    (m, side of the square arena; start and goal are about ``0.8 * arena`` apart),
    ``max_steps=500`` (time limit in steps), ``dt=0.1`` (s), ``action_frame="goal"`` (see
    Action), ``seed``, ``device``.
Auto-reset
    ``SAME_STEP`` (see :mod:`rl_system.envs.base`): finished envs get a fresh random layout in the same
    step (only those env indices); ``final_obs`` is the observation the episode ended on.
    Randomness comes from one ``torch.Generator`` (``seed`` makes the batch reproducible).
"""

from __future__ import annotations

import math

import torch

from rl_system.envs.base import Box, Obs, StepResult, TensorSpec, VecEnv, make_generator

ROBOT_RADIUS = 0.2
MAX_SPEED = 2.0
TAU_V = 0.2
LIDAR_RANGE = 4.0
N_BEAMS = 36
ELEVATIONS_DEG = (-10.0, 0.0, 10.0, 20.0)
CEILING = 5.0
GOAL_TOLERANCE = 0.5
GOAL_REWARD = 10.0
COLLISION_PENALTY = 10.0
DYN_Z_RANGE = (0.5, 3.5)
_FAR = -1.0e4  # where removed cylinders are parked
_RESAMPLE_ROUNDS = 8


class NavigationVecEnv(VecEnv):
    """``num_envs`` lidar navigation envs as tensors on ``device``; see the module docstring."""

    def __init__(self, num_envs: int, device: str | torch.device = "cpu", seed: int | None = None,
                 num_static: int = 16, num_dynamic: int = 5, arena: float = 20.0, max_steps: int = 500,
                 dt: float = 0.1, action_frame: str = "goal") -> None:
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        if num_static < 0 or num_dynamic < 0:
            raise ValueError("num_static and num_dynamic must be >= 0")
        if max_steps < 1 or dt <= 0 or arena <= 0:
            raise ValueError("max_steps must be >= 1, dt and arena > 0")
        if action_frame not in ("goal", "world"):
            raise ValueError(f"action_frame must be 'goal' or 'world', got {action_frame!r}")
        self.action_frame = action_frame
        self.num_envs = n = int(num_envs)
        self.device = dev = torch.device(device)
        self.num_static, self.num_dynamic = int(num_static), int(num_dynamic)
        self.arena, self.max_steps, self.dt = float(arena), int(max_steps), float(dt)
        self.observation_spec = {
            "state": TensorSpec((8,)),
            "lidar": TensorSpec((1, N_BEAMS, len(ELEVATIONS_DEG)), low=0.0, high=LIDAR_RANGE),
            "direction": TensorSpec((2,), low=-1.0, high=1.0),
            "dynamic_obstacle": TensorSpec((self.num_dynamic, 10)),
        }
        self.action_spec = Box((3,), (-1.0,) * 3, (1.0,) * 3)

        self._generator = make_generator(dev, seed)

        f32 = dict(dtype=torch.float32, device=dev)
        s, m = self.num_static, self.num_dynamic
        self._pos = torch.zeros(n, 3, **f32)
        self._vel = torch.zeros(n, 3, **f32)
        self._goal = torch.zeros(n, 3, **f32)
        self._yaw = torch.zeros(n, **f32)  # goal-frame heading
        self._prev_dist = torch.zeros(n, **f32)
        self._steps = torch.zeros(n, dtype=torch.int64, device=dev)
        self._cyl = torch.zeros(n, s, 4, **f32)  # x, y, radius, height
        self._dyn_pos = torch.zeros(n, m, 3, **f32)
        self._dyn_vel = torch.zeros(n, m, 3, **f32)
        self._dyn_size = torch.zeros(n, m, 3, **f32)  # radius, half-height, is_sphere (0/1)

        # Lidar constants.
        beam = torch.arange(N_BEAMS, **f32) * (2 * math.pi / N_BEAMS)
        self._beam_angle = beam  # [B] azimuth in the goal frame
        elev = torch.tensor(ELEVATIONS_DEG, dtype=torch.float64, device=dev) * (math.pi / 180)
        tan = torch.tan(elev)
        tan = torch.where(tan.abs() < 1e-6, torch.full_like(tan, 1e-6), tan)
        self._tan = tan.float()  # [E], never 0
        self._inv_cos = (1.0 / torch.cos(elev)).float()  # [E]
        self._alpha = min(1.0, self.dt / TAU_V)
        self._dyn_lo = torch.tensor([0.0, 0.0, DYN_Z_RANGE[0]], **f32)
        self._dyn_hi = torch.tensor([self.arena, self.arena, DYN_Z_RANGE[1]], **f32)
        self._needs_reset = True

    # ------------------------------------------------------------------ public API

    def reset(self, seed: int | None = None) -> Obs:
        """Reset all envs with fresh layouts; ``seed`` reseeds the generator."""
        if seed is not None:
            self._generator.manual_seed(seed)
        self._reset_envs(torch.arange(self.num_envs, device=self.device))
        self._needs_reset = False
        return self._observe(None)

    def step(self, action: torch.Tensor) -> StepResult:
        action = self._step_action(action)
        dt = self.dt

        # Robot: velocity command (goal frame rotated to the world by the episode's yaw, unless
        # action_frame="world"), first-order velocity tracking, then integrate.
        v_cmd = torch.nan_to_num(action, 0.0, 0.0, 0.0).clamp(-1.0, 1.0).mul_(MAX_SPEED)
        if self.action_frame == "goal":
            cos_y, sin_y = torch.cos(self._yaw), torch.sin(self._yaw)
            vx, vy = v_cmd[:, 0].clone(), v_cmd[:, 1]
            v_cmd[:, 0] = cos_y * vx - sin_y * vy
            v_cmd[:, 1] = sin_y * vx + cos_y * vy
        self._vel.add_(v_cmd.sub_(self._vel).mul_(self._alpha))
        self._pos.add_(self._vel * dt)

        # Moving obstacles: constant velocity, bounce at the walls / height band.
        if self.num_dynamic:
            self._dyn_pos.add_(self._dyn_vel * dt)
            lo, hi = self._dyn_lo, self._dyn_hi
            below, above = self._dyn_pos < lo, self._dyn_pos > hi
            self._dyn_pos.copy_(torch.where(below, 2 * lo - self._dyn_pos,
                                            torch.where(above, 2 * hi - self._dyn_pos, self._dyn_pos)))
            self._dyn_vel.copy_(torch.where(below | above, -self._dyn_vel, self._dyn_vel))

        # Reward and termination.
        dist = torch.linalg.vector_norm(self._goal - self._pos, dim=1)
        reward = self._prev_dist - dist
        self._prev_dist.copy_(dist)
        collision = self._collision()
        success = (dist < GOAL_TOLERANCE) & ~collision
        reward = reward + GOAL_REWARD * success.float() - COLLISION_PENALTY * collision.float()
        terminated = success | collision
        self._steps.add_(1)
        truncated = self._steps >= self.max_steps
        done = terminated | truncated

        final_obs = self._observe(None)
        idx = done.nonzero().squeeze(1)
        if idx.numel() == 0:
            obs = final_obs
        else:
            self._notify_autoreset(idx)
            self._reset_envs(idx)
            fresh = self._observe(idx)
            obs = {k: v.index_copy(0, idx, fresh[k]) for k, v in final_obs.items()}
        info = {"success": success, "collision": collision}
        return StepResult(obs, reward, terminated, truncated, final_obs, info)

    _STATE_KEYS = ("pos", "vel", "goal", "yaw", "prev_dist", "steps", "cyl", "dyn_pos", "dyn_vel", "dyn_size")

    def state_dict(self) -> dict[str, torch.Tensor]:
        state = {k: getattr(self, "_" + k).clone() for k in self._STATE_KEYS}
        state["generator"] = self._generator.get_state()
        return state

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        for k in self._STATE_KEYS:
            getattr(self, "_" + k).copy_(state[k])
        self._generator.set_state(state["generator"])
        self._needs_reset = False

    def set_state(self, **fields: torch.Tensor) -> Obs:
        """Overwrite parts of the state of all envs (keys as in :meth:`state_dict` except
        ``generator``: ``pos [N,3]``, ``vel [N,3]``, ``goal [N,3]``, ``yaw [N]``, ``cyl [N,S,4]``
        (x, y, radius, height), ``dyn_pos/dyn_vel [N,M,3]``, ``dyn_size [N,M,3]`` (radius,
        half-height, is_sphere), ...). If ``pos`` or ``goal`` is given without ``yaw``, the goal
        frame is recomputed from the robot to the goal and ``prev_dist`` too. Returns the obs."""
        for k, v in fields.items():
            if k not in self._STATE_KEYS:
                raise KeyError(f"unknown state field {k!r}")
            getattr(self, "_" + k).copy_(torch.as_tensor(v))
        if ("pos" in fields or "goal" in fields) and "yaw" not in fields:
            d = self._goal - self._pos
            self._yaw.copy_(torch.atan2(d[:, 1], d[:, 0]))
        if ("pos" in fields or "goal" in fields) and "prev_dist" not in fields:
            self._prev_dist.copy_(torch.linalg.vector_norm(self._goal - self._pos, dim=1))
        self._needs_reset = False
        return self._observe(None)

    _RENDER_KEYS = ("pos", "goal", "yaw", "cyl", "dyn_pos", "dyn_size")

    def render_state(self, env_index: int = 0) -> dict[str, torch.Tensor]:
        """What a renderer draws of env ``env_index``, as fresh CPU float32 tensors (world frame,
        metres): robot ``pos`` and ``goal`` ``[3]``; ``yaw`` ``[]`` (rad, the goal frame's heading:
        lidar beam ``k`` points at ``yaw + 2 pi k / N_BEAMS``); static cylinders ``cyl`` ``[S, 4]``
        (x, y, radius, height; removed ones are parked far outside the arena); moving obstacles
        ``dyn_pos`` ``[M, 3]`` and ``dyn_size`` ``[M, 3]`` (radius, half-height, is_sphere). The
        arena's side is :attr:`arena`."""
        return {k: getattr(self, "_" + k)[env_index].to("cpu", copy=True) for k in self._RENDER_KEYS}

    # ------------------------------------------------------------------ internals

    def _rand(self, *shape: int) -> torch.Tensor:
        return torch.rand(shape, generator=self._generator, device=self.device)

    def _uniform(self, lo: float, hi: float, *shape: int) -> torch.Tensor:
        return self._rand(*shape).mul_(hi - lo).add_(lo)

    def _reset_envs(self, idx: torch.Tensor) -> None:
        """Draw fresh layouts for the envs ``idx`` (int64 [k])."""
        k, a, s, m = idx.numel(), self.arena, self.num_static, self.num_dynamic
        # Start / goal on opposite sides of the centre.
        theta = self._uniform(0.0, 2 * math.pi, k)
        radial = torch.stack([torch.cos(theta), torch.sin(theta)], 1) * (0.4 * a)
        centre = a / 2
        start_xy = centre + radial + self._uniform(-0.05 * a, 0.05 * a, k, 2)
        goal_xy = centre - radial + self._uniform(-0.05 * a, 0.05 * a, k, 2)
        start = torch.cat([start_xy, self._uniform(1.0, 2.5, k, 1)], 1)
        goal = torch.cat([goal_xy, self._uniform(1.0, 2.5, k, 1)], 1)
        d = goal - start

        # Static cylinders, resampled (only the offending ones) while too close to start/goal.
        cyl = torch.empty(k, s, 4, device=self.device)
        if s:
            def draw_cyl() -> torch.Tensor:
                return torch.cat([self._uniform(0.0, a, k, s, 2), self._uniform(0.3, 1.0, k, s, 1),
                                  self._uniform(1.0, 4.0, k, s, 1)], 2)

            def bad_cyl(c: torch.Tensor) -> torch.Tensor:
                clear = c[..., 2] + 1.0
                return ((torch.linalg.vector_norm(c[..., :2] - start_xy[:, None], dim=2) < clear)
                        | (torch.linalg.vector_norm(c[..., :2] - goal_xy[:, None], dim=2) < clear))

            cyl = draw_cyl()
            for _ in range(_RESAMPLE_ROUNDS):
                cyl = torch.where(bad_cyl(cyl)[..., None], draw_cyl(), cyl)
            cyl[..., :2].masked_fill_(bad_cyl(cyl)[..., None], _FAR)

        # Moving obstacles, resampled while within 3 m of the start.
        dpos = torch.empty(k, m, 3, device=self.device)
        dvel = torch.empty(k, m, 3, device=self.device)
        dsize = torch.empty(k, m, 3, device=self.device)
        if m:
            def draw_dpos() -> torch.Tensor:
                return torch.cat([self._uniform(0.0, a, k, m, 2), self._uniform(*DYN_Z_RANGE, k, m, 1)], 2)

            def bad_dpos(p: torch.Tensor) -> torch.Tensor:
                return torch.linalg.vector_norm(p - start[:, None], dim=2) < 3.0

            dpos = draw_dpos()
            for _ in range(_RESAMPLE_ROUNDS):
                dpos = torch.where(bad_dpos(dpos)[..., None], draw_dpos(), dpos)
            heading = self._uniform(0.0, 2 * math.pi, k, m)
            speed = self._uniform(0.5, 1.5, k, m)
            dvel = torch.stack([speed * torch.cos(heading), speed * torch.sin(heading),
                                self._uniform(-0.2, 0.2, k, m)], 2)
            radius = self._uniform(0.3, 0.7, k, m)
            sphere = self._rand(k, m) < 0.5
            half_h = torch.where(sphere, radius, self._uniform(0.25, 0.5, k, m))
            dsize = torch.stack([radius, half_h, sphere.float()], 2)

        self._pos.index_copy_(0, idx, start)
        self._vel.index_fill_(0, idx, 0.0)
        self._goal.index_copy_(0, idx, goal)
        self._yaw.index_copy_(0, idx, torch.atan2(d[:, 1], d[:, 0]))
        self._prev_dist.index_copy_(0, idx, torch.linalg.vector_norm(d, dim=1))
        self._steps.index_fill_(0, idx, 0)
        self._cyl.index_copy_(0, idx, cyl)
        self._dyn_pos.index_copy_(0, idx, dpos)
        self._dyn_vel.index_copy_(0, idx, dvel)
        self._dyn_size.index_copy_(0, idx, dsize)

    def _collision(self) -> torch.Tensor:
        pos = self._pos
        z = pos[:, 2]
        hit = (z < ROBOT_RADIUS) | (z > CEILING - ROBOT_RADIUS)
        hit |= ((pos[:, :2] < ROBOT_RADIUS) | (pos[:, :2] > self.arena - ROBOT_RADIUS)).any(1)
        if self.num_static:
            cyl = self._cyl
            horiz = torch.linalg.vector_norm(cyl[..., :2] - pos[:, None, :2], dim=2)
            hit |= ((horiz < cyl[..., 2] + ROBOT_RADIUS) & (z[:, None] < cyl[..., 3] + ROBOT_RADIUS)).any(1)
        if self.num_dynamic:
            rel = self._dyn_pos - pos[:, None]
            r, hh, sphere = self._dyn_size.unbind(2)
            d3 = torch.linalg.vector_norm(rel, dim=2)
            horiz = torch.linalg.vector_norm(rel[..., :2], dim=2)
            hit_sphere = d3 < r + ROBOT_RADIUS
            hit_cyl = (horiz < r + ROBOT_RADIUS) & (rel[..., 2].abs() < hh + ROBOT_RADIUS)
            hit |= torch.where(sphere > 0.5, hit_sphere, hit_cyl).any(1)
        return hit

    def _observe(self, idx: torch.Tensor | None) -> Obs:
        """Fresh observations of all envs (``idx=None``) or of the envs ``idx``."""
        def sel(t: torch.Tensor) -> torch.Tensor:
            return t if idx is None else t.index_select(0, idx)

        pos, vel, goal, yaw = sel(self._pos), sel(self._vel), sel(self._goal), sel(self._yaw)
        cos_y, sin_y = torch.cos(yaw), torch.sin(yaw)

        def to_goal_frame(v: torch.Tensor) -> torch.Tensor:  # [k, ..., 3] world -> goal frame
            shape = (-1,) + (1,) * (v.dim() - 2)
            c, s_ = cos_y.view(shape), sin_y.view(shape)
            x, y, zz = v.unbind(-1)
            return torch.stack([c * x + s_ * y, c * y - s_ * x, zz], -1)

        rel_goal = goal - pos
        dist = torch.linalg.vector_norm(rel_goal, dim=1, keepdim=True)
        unit = to_goal_frame(rel_goal / dist.clamp_min(1e-6))
        horiz = torch.linalg.vector_norm(rel_goal[:, :2], dim=1, keepdim=True)
        state = torch.cat([unit, horiz, rel_goal[:, 2:3], to_goal_frame(vel)], 1)
        direction = torch.stack([cos_y, sin_y], 1)
        lidar = self._lidar(pos, yaw, sel(self._cyl))
        dyn = self._dynamic_obs(pos, vel, sel(self._dyn_pos), sel(self._dyn_vel), sel(self._dyn_size),
                                to_goal_frame)
        return {"state": state, "lidar": lidar, "direction": direction, "dynamic_obstacle": dyn}

    def _lidar(self, pos: torch.Tensor, yaw: torch.Tensor, cyl: torch.Tensor) -> torch.Tensor:
        """Ray-cast ``[k, 1, B, E]`` (LIDAR_RANGE - distance, clipped to [0, LIDAR_RANGE]).

        All distances are first horizontal distances ``t`` along the beam's azimuth (the 3D
        distance is ``t / cos(elevation)``): arena walls ``[k, B]``, floor/ceiling ``[k, E]``,
        static cylinders via :meth:`_cast_cylinders`; the minimum is taken over all of them."""
        k = pos.shape[0]
        az = yaw[:, None] + self._beam_angle  # [k, B]
        ux, uy = torch.cos(az), torch.sin(az)
        z0 = pos[:, 2:3]  # [k, 1]
        tan = self._tan  # [E]

        # Floor / ceiling (horizontal distance) [k, E] and arena walls [k, B].
        t_plane = torch.where(tan > 0, (CEILING - z0) / tan, -z0 / tan)
        eps = 1e-9
        ux_s = torch.where(ux.abs() < eps, torch.full_like(ux, eps), ux)
        uy_s = torch.where(uy.abs() < eps, torch.full_like(uy, eps), uy)
        px, py = pos[:, 0:1], pos[:, 1:2]
        tx = torch.where(ux_s > 0, (self.arena - px) / ux_s, -px / ux_s)
        ty = torch.where(uy_s > 0, (self.arena - py) / uy_s, -py / uy_s)
        t_bound = torch.minimum(torch.minimum(tx, ty)[:, :, None], t_plane[:, None, :])  # [k, B, E]

        if self.num_static:
            t_bound = t_bound.view(k * N_BEAMS, -1)  # fresh tensor, lowered in place
            self._cast_cylinders(pos, ux, uy, cyl, t_bound)
        dist = t_bound.view(k, N_BEAMS, -1) * self._inv_cos
        return (LIDAR_RANGE - dist).clamp_(0.0, LIDAR_RANGE).view(k, 1, N_BEAMS, len(ELEVATIONS_DEG))

    def _cast_cylinders(self, pos: torch.Tensor, ux: torch.Tensor, uy: torch.Tensor, cyl: torch.Tensor,
                        t_out_buf: torch.Tensor) -> None:
        """Lower ``t_out_buf`` ([k * B, E] horizontal hit distances) to the static cylinder hits.

        Exact and fully batched, but sparse: (1) the (env, cylinder) pairs whose surface is within
        range are selected ([k, S] mask -> P1 pairs); (2) for those, the 2D ray-circle intersection
        is set up per azimuth ([P1, B]) and the (pair, beam) candidate hits are selected again
        (P2, a superset of the true hits, tested without a sqrt); their horizontal entry/exit
        distances are solved exactly; (3) each elevation restricts ``t`` to where the
        ray height lies within ``[0, height]`` ([P2, E] window, which also handles the top cap);
        (4) a scatter-amin reduces over cylinders into the [k * B, E] buffer."""
        s = cyl.shape[1]
        rel = cyl[..., :2] - pos[:, None, :2]  # [k, S, 2]
        dist2 = (rel * rel).sum(2)
        reach = cyl[..., 2] + LIDAR_RANGE
        pair = (dist2 < reach * reach).view(-1).nonzero().squeeze(1)  # [P1] flat env * S + cyl
        if pair.numel() == 0:
            return
        env = torch.div(pair, s, rounding_mode="floor")
        rel_p = rel.view(-1, 2).index_select(0, pair)  # [P1, 2]
        cyl_p = cyl.view(-1, 4).index_select(0, pair)
        b = rel_p[:, 0:1] * ux.index_select(0, env) + rel_p[:, 1:2] * uy.index_select(0, env)  # [P1, B]
        c = dist2.view(-1).index_select(0, pair) - cyl_p[:, 2] * cyl_p[:, 2]  # [P1]
        disc = b * b - c[:, None]
        # Candidate hits (no sqrt yet): the line meets the circle, the exit is ahead (centre ahead
        # or robot inside) and the entry can be within range (entry >= b - r).
        cand = (disc >= 0) & ((b >= 0) | (c <= 0)[:, None]) & (b < (cyl_p[:, 2] + LIDAR_RANGE)[:, None])
        hit = cand.view(-1).nonzero().squeeze(1)  # [P2] flat pair * B + beam
        if hit.numel() == 0:
            return
        p_of_hit = torch.div(hit, N_BEAMS, rounding_mode="floor")
        beam = hit - p_of_hit * N_BEAMS
        b_h = b.view(-1).index_select(0, hit)
        sq = disc.view(-1).index_select(0, hit).sqrt_()
        t_in = (b_h - sq).clamp_min_(0)  # [P2] horizontal entry (0 if inside)
        t_ex = b_h + sq
        # Height window 0 <= z0 + t * tan <= h per pair and elevation.
        z0 = pos[:, 2].index_select(0, env)[:, None]  # [P1, 1]
        ta = -z0 / self._tan  # [P1, E]
        tb = (cyl_p[:, 3:4] - z0) / self._tan
        lo = torch.minimum(ta, tb).index_select(0, p_of_hit)  # [P2, E]
        hi = torch.maximum(ta, tb).index_select(0, p_of_hit)
        enter = torch.maximum(lo, t_in[:, None])
        enter.masked_fill_(enter > torch.minimum(hi, t_ex[:, None]), math.inf)
        row = env.index_select(0, p_of_hit) * N_BEAMS + beam  # [P2] row of t_out_buf
        t_out_buf.scatter_reduce_(0, row[:, None].expand_as(enter), enter, reduce="amin")

    def _dynamic_obs(self, pos, vel, dpos, dvel, dsize, to_goal_frame) -> torch.Tensor:
        k, m = pos.shape[0], self.num_dynamic
        if m == 0:
            return torch.zeros(k, 0, 10, device=self.device)
        rel = dpos - pos[:, None]  # [k, M, 3]
        d3 = torch.linalg.vector_norm(rel, dim=2)
        visible = d3 <= LIDAR_RANGE
        order = torch.where(visible, d3, torch.full_like(d3, math.inf)).argsort(1)
        horiz = torch.linalg.vector_norm(rel[..., :2], dim=2, keepdim=True)
        feat = torch.cat([to_goal_frame(rel), horiz, rel[..., 2:3].abs(),
                          to_goal_frame(dvel - vel[:, None]), 2 * dsize[..., 0:1], 2 * dsize[..., 1:2]], 2)
        feat = feat * visible[..., None]
        return feat.gather(1, order[..., None].expand(k, m, 10))
