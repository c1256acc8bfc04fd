"""CartPole-v1 as a batched torch environment: ``N`` cart-poles stepped at once on one device.

A tensor reimplementation of Gymnasium's ``CartPole-v1``
(``gymnasium.envs.classic_control.cartpole.CartPoleEnv`` + ``TimeLimit(500)``): same constants,
same explicit-Euler integrator and same order of floating-point operations, so a float64 run
reproduces Gymnasium's trajectories to rounding error (see ``tests/envs/test_envs.py``).

Observation
    ``{"obs": float32 [N, 4]}``: cart position, cart velocity, pole angle (rad), pole angular
    velocity. Gymnasium's nominal bounds are ``±4.8``, ``±inf``, ``±0.418`` (24°), ``±inf``;
    they differ per dimension, so the scalar ``TensorSpec.low/high`` are left ``None``.
    ``velocities=False``: ``float32 [N, 2]``, cart position and pole angle only -- the
    partially observable CartPole of the memory benchmarks (RL Zoo's ``CartPoleNoVel``, POPGym's
    ``StatelessCartPole``): a policy must infer the velocities from what it remembers.
Action
    ``Discrete(2)``, int64 ``[N]``: ``0`` pushes the cart left, ``1`` right, with a force of
    10 N.
Reward
    ``1.0`` on every step, including the step that terminates the episode (float32 ``[N]``).
Termination
    ``terminated`` when the cart leaves ``(-2.4, 2.4)`` or the pole angle leaves ``±12°``
    (``±0.2095`` rad), checked on the state after the step.
Truncation
    ``truncated`` when the episode has run ``max_episode_steps`` steps (500, as in
    ``CartPole-v1``; ``None`` disables it). As with Gymnasium's ``TimeLimit``, truncation does
    not look at termination, so both flags can be set on the same step; a learner should let
    ``terminated`` win (no bootstrap).
Start state
    Every state variable uniform in ``[-0.05, 0.05)``, drawn from a ``torch.Generator`` on the
    env's device (``seed`` makes the batch reproducible on a given device; different devices
    use different generators and so draw different numbers).
Auto-reset
    ``SAME_STEP`` (see :mod:`rl_system.envs.base`): where ``terminated | truncated`` the returned ``obs``
    is already the reset observation and ``final_obs`` the one the episode ended on.

``dtype`` is the dtype of the physics state (``float64`` matches Gymnasium, ``float32`` is
the faster default); observations are always float32. ``step`` is allocation-light: the
physics runs in preallocated buffers, and only the returned tensors are fresh each step (the
caller owns them; the env never writes to them afterwards).
"""

from __future__ import annotations

import math

import torch

from rl_system.envs.base import Discrete, Obs, StepResult, TensorSpec, VecEnv, make_generator

# Gymnasium CartPoleEnv constants.
GRAVITY = 9.8
MASSCART = 1.0
MASSPOLE = 0.1
TOTAL_MASS = MASSPOLE + MASSCART
LENGTH = 0.5  # half the pole's length
POLEMASS_LENGTH = MASSPOLE * LENGTH
FORCE_MAG = 10.0
TAU = 0.02  # seconds between state updates
THETA_THRESHOLD_RADIANS = 12 * 2 * math.pi / 360
X_THRESHOLD = 2.4
RESET_LOW, RESET_HIGH = -0.05, 0.05


class CartPoleVecEnv(VecEnv):
    """``num_envs`` CartPole-v1 environments as tensors on ``device``; see the module docstring."""

    def __init__(self, num_envs: int, device: str | torch.device = "cpu", seed: int | None = None,
                 dtype: torch.dtype = torch.float32, max_episode_steps: int | None = 500,
                 velocities: bool = True) -> None:
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        if not dtype.is_floating_point:
            raise ValueError(f"dtype must be a floating-point dtype, got {dtype}")
        if max_episode_steps is not None and max_episode_steps < 1:
            raise ValueError(f"max_episode_steps must be >= 1 or None, got {max_episode_steps}")
        self.num_envs = int(num_envs)
        self.device = torch.device(device)
        self.dtype = dtype
        self.max_episode_steps = max_episode_steps
        self.velocities = bool(velocities)
        self.observation_spec = {"obs": TensorSpec(shape=(4 if self.velocities else 2,), dtype=torch.float32)}
        self.action_spec = Discrete(2)

        n, dev = self.num_envs, self.device
        self._generator = make_generator(dev, seed)
        # On CPU a host-side branch on "any env done?" is free and lets the reset draw random
        # numbers only for the finished envs; on accelerators it would force a sync, so there
        # every step draws a full batch of reset states and blends them in with ``torch.where``.
        self._sync_free_reset = dev.type != "cpu"

        # Physics state [N, 4], columns x, x_dot, theta, theta_dot. Row-major ("array of
        # structs") so that the float32 observation is one contiguous cast/copy; the physics runs
        # on strided column views, which costs next to nothing at these sizes.
        self._state = torch.zeros((n, 4), dtype=dtype, device=dev)
        self._steps = torch.zeros(n, dtype=torch.int64, device=dev)  # steps in the current episode
        # Scratch buffers and views reused by every step (python-scalar operands cost a tensor
        # wrap per op, so the constants are 0-d tensors).
        def const(value: float) -> torch.Tensor:
            return torch.tensor(value, dtype=dtype, device=dev)

        self._c = {name: const(value) for name, value in (
            ("polemass_length", POLEMASS_LENGTH), ("total_mass", TOTAL_MASS), ("gravity", GRAVITY),
            ("masspole", MASSPOLE), ("four_thirds", 4.0 / 3.0), ("length", LENGTH), ("tau", TAU))}
        self._force_table = torch.tensor([-FORCE_MAG, FORCE_MAG], dtype=dtype, device=dev)
        self._thresholds = torch.tensor([[X_THRESHOLD], [THETA_THRESHOLD_RADIANS]], dtype=dtype, device=dev)
        self._force = torch.empty(n, dtype=dtype, device=dev)
        self._cos = torch.empty(n, dtype=dtype, device=dev)
        self._sin = torch.empty(n, dtype=dtype, device=dev)
        self._temp = torch.empty(n, dtype=dtype, device=dev)
        self._buf = torch.empty(n, dtype=dtype, device=dev)
        # Time derivatives, same layout as the state: (x_dot, xacc, theta_dot, thetaacc).
        self._deriv = torch.empty((n, 4), dtype=dtype, device=dev)
        # |x| and |theta| as rows ([2, N]) so that the bounds check runs along N.
        self._abs = torch.empty((2, n), dtype=dtype, device=dev)
        self._out_of_bounds = torch.empty((2, n), dtype=torch.bool, device=dev)
        self._reset_buf = torch.empty((n, 4), dtype=dtype, device=dev)  # used by the sync-free reset
        # Views into the buffers above, made once (a view costs about as much as a small op).
        # Only in-place ops touch ``_state``/``_deriv``, so these stay valid.
        self._x_dot, self._theta, self._theta_dot = self._state[:, 1], self._state[:, 2], self._state[:, 3]
        self._x_and_theta_rows = self._state[:, 0::2].T  # [2, N] view
        self._deriv_x_dot, self._xacc = self._deriv[:, 0], self._deriv[:, 1]
        self._deriv_theta_dot, self._thetaacc = self._deriv[:, 2], self._deriv[:, 3]
        self._x_out, self._theta_out = self._out_of_bounds[0], self._out_of_bounds[1]
        self._needs_reset = True

    # ------------------------------------------------------------------ public API

    def reset(self, seed: int | None = None) -> Obs:
        """Reset all envs; ``seed`` reseeds the generator (else it continues its stream)."""
        if seed is not None:
            self._generator.manual_seed(seed)
        self._state.uniform_(RESET_LOW, RESET_HIGH, generator=self._generator)
        self._steps.zero_()
        self._needs_reset = False
        return {"obs": self._observe()}

    def set_state(self, state: torch.Tensor) -> Obs:
        """Overwrite the physics state of all envs with ``state`` ``[N, 4]`` (x, x_dot, theta,
        theta_dot) and start new episodes from it (step counters back to 0); returns the obs."""
        state = torch.as_tensor(state)
        if tuple(state.shape) != (self.num_envs, 4):
            raise ValueError(f"state must have shape ({self.num_envs}, 4), got {tuple(state.shape)}")
        self._state.copy_(state)
        self._steps.zero_()
        self._needs_reset = False
        return {"obs": self._observe()}

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {"state": self._state.clone(), "steps": self._steps.clone(),
                "generator": self._generator.get_state()}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        self._state.copy_(state["state"])
        self._steps.copy_(state["steps"])
        self._generator.set_state(state["generator"])
        self._needs_reset = False

    @property
    def state(self) -> torch.Tensor:
        """A copy of the physics state, ``[N, 4]`` in ``dtype``."""
        return self._state.clone()

    @property
    def episode_steps(self) -> torch.Tensor:
        """A copy of the per-env step counters of the current episodes, int64 ``[N]``."""
        return self._steps.clone()

    def step(self, action: torch.Tensor) -> StepResult:
        action = self._step_action(action)

        c, state, deriv = self._c, self._state, self._deriv
        theta, theta_dot = self._theta, self._theta_dot
        force, cos, sin, temp, buf = self._force, self._cos, self._sin, self._temp, self._buf
        xacc, thetaacc = self._xacc, self._thetaacc

        # Same formulas and operation order as Gymnasium's CartPoleEnv.step.
        # force = +-10 (on CPU index_select also raises IndexError for actions outside {0, 1}).
        torch.index_select(self._force_table, 0, action, out=force)
        torch.cos(theta, out=cos)
        torch.sin(theta, out=sin)
        # temp = (force + polemass_length * theta_dot**2 * sin) / total_mass
        torch.mul(theta_dot, theta_dot, out=temp)
        temp.mul_(c["polemass_length"]).mul_(sin).add_(force).div_(c["total_mass"])
        # thetaacc = (gravity * sin - cos * temp) / (length * (4/3 - masspole * cos**2 / total_mass))
        torch.mul(sin, c["gravity"], out=thetaacc)
        torch.mul(cos, temp, out=buf)
        thetaacc.sub_(buf)
        torch.mul(cos, cos, out=buf)
        buf.mul_(c["masspole"]).div_(c["total_mass"])
        torch.sub(c["four_thirds"], buf, out=buf)
        buf.mul_(c["length"])
        thetaacc.div_(buf)
        # xacc = temp - polemass_length * thetaacc * cos / total_mass
        torch.mul(thetaacc, c["polemass_length"], out=buf)
        buf.mul_(cos).div_(c["total_mass"])
        torch.sub(temp, buf, out=xacc)
        # Explicit Euler on all four variables at once: state += tau * (x_dot, xacc, theta_dot, thetaacc).
        self._deriv_x_dot.copy_(self._x_dot)
        self._deriv_theta_dot.copy_(theta_dot)
        deriv.mul_(c["tau"])
        state.add_(deriv)

        # Terminated where |x| > 2.4 or |theta| > 12 degrees.
        torch.abs(self._x_and_theta_rows, out=self._abs)
        torch.gt(self._abs, self._thresholds, out=self._out_of_bounds)
        terminated = self._x_out | self._theta_out
        self._steps.add_(1)
        if self.max_episode_steps is None:
            truncated = torch.zeros_like(terminated)
        else:
            truncated = self._steps >= self.max_episode_steps
        done = terminated | truncated

        final_obs = self._observe()
        self._auto_reset(done)
        obs = self._observe()
        reward = torch.ones(self.num_envs, dtype=torch.float32, device=self.device)
        return StepResult({"obs": obs}, reward, terminated, truncated, {"obs": final_obs}, {})

    # ------------------------------------------------------------------ internals

    def _observe(self) -> torch.Tensor:
        """A fresh float32 ``[N, 4]`` observation of the current state (``[N, 2]``: x, theta)."""
        if not self.velocities:
            return self._state[:, ::2].to(torch.float32, copy=True)
        return self._state.to(torch.float32, copy=True)

    def _auto_reset(self, done: torch.Tensor) -> None:
        if self._sync_free_reset:
            fresh = self._reset_buf.uniform_(RESET_LOW, RESET_HIGH, generator=self._generator)
            torch.where(done.unsqueeze(1), fresh, self._state, out=self._state)
            self._steps.masked_fill_(done, 0)
            return
        idx = done.nonzero().squeeze(1)
        if idx.numel() == 0:
            return
        fresh = torch.empty((idx.numel(), 4), dtype=self.dtype, device=self.device)
        fresh.uniform_(RESET_LOW, RESET_HIGH, generator=self._generator)
        self._state.index_copy_(0, idx, fresh)
        self._steps.index_fill_(0, idx, 0)
