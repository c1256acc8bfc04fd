"""An EnvPool batch (C++ envs stepped by a thread pool) as a :class:`rl_system.envs.base.VecEnv`.

``env.name: "envpool:Hopper-v5"`` builds ``envpool.make("Hopper-v5", env_type="gymnasium",
num_envs=N, batch_size=N, seed=seed, num_threads=1)``: EnvPool's synchronous mode, every env
stepped on each call. EnvPool reimplements the Gymnasium MuJoCo, Atari, classic-control and
dm_control tasks (``envpool.list_all_envs()``) and steps them several times faster than
Gymnasium's vector envs on few cores (``bench/results/mujoco/stepping.md``: Hopper-v5, N = 8, one
thread: ~7,400 env steps/s against ~2,540).

Spaces and conversions are those of the Gymnasium adapter (:class:`rl_system.envs.gym_adapter.NumpyBatchEnv`).
What differs is the auto-reset: EnvPool resets a finished env on its *next* step and ignores
that step's action (Gymnasium's ``NEXT_STEP`` mode), where this system's envs return the next
episode's first observation in the very step that ended the last (``SAME_STEP``). So after a step
where envs ``D`` finished, this adapter steps just ``D`` once more (EnvPool's synchronous mode
takes a subset of env ids): EnvPool resets them, and their first observations replace the final
ones in ``obs`` while ``final_obs`` keeps the final ones. No transition of the reset step reaches
the caller, so nothing needs masking downstream; the extra call costs one partial step per step
on which some env finished.

Keyword arguments (``env.kwargs``) go to ``envpool.make`` (``num_threads``, ``frame_skip``,
``episodic_life``, ...); ``batch_size`` is refused (the adapter runs the pool synchronously).

Seeding: EnvPool seeds env ``i`` with ``seed + i`` when the pool is built and has no reseeding
reset, so ``reset(seed=s)`` rebuilds the pool with seed ``s`` (milliseconds for MuJoCo): equal
seeds give equal trajectories. ``reset()`` without a seed continues the envs' streams.

``info``: boolean entries of the info of the step an env finished on come back as bool ``[N]``
outcome tensors (False where the env did not finish), as with the Gymnasium adapter.
"""

from __future__ import annotations

import difflib
from typing import Any

import numpy as np
import torch

from rl_system.envs.base import Obs, StepResult
from rl_system.envs.gym_adapter import NumpyBatchEnv

_NOT_FORWARDED = {"env_id", "players", "elapsed_step"}


def _envpool() -> Any:
    try:
        import envpool
    except ImportError:
        raise ValueError("envpool is not installed: pip install envpool, or pip install -e '.[envpool]' in a checkout (Linux wheels only)") from None
    return envpool


class EnvPoolVecEnv(NumpyBatchEnv):
    """``num_envs`` envs of EnvPool task ``env_id`` behind the torch ``VecEnv`` API (see the
    module docstring). Unknown ids and a ``batch_size`` keyword raise ``ValueError``."""

    def __init__(self, env_id: str, num_envs: int, device: str | torch.device = "cpu", seed: int | None = None,
                 num_threads: int = 1, **env_kwargs: Any) -> None:
        envpool = _envpool()
        known = envpool.list_all_envs()
        if env_id not in known:
            close = difflib.get_close_matches(env_id, known, n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else "; see envpool.list_all_envs()"
            raise ValueError(f"unknown EnvPool task {env_id!r}{hint}")
        if "batch_size" in env_kwargs:
            raise ValueError("envpool: batch_size is not a setting here (the pool is stepped synchronously, "
                             "batch_size = num_envs)")
        self._init_batch(env_id, num_envs, device)
        self._make_kwargs = {"env_type": "gymnasium", "num_envs": self.num_envs, "batch_size": self.num_envs,
                             "num_threads": int(num_threads), **env_kwargs}
        self._seed = 0 if seed is None else int(seed)
        self.pool = self._build(self._seed)
        self._fresh = True  # the pool has not been reset yet: a reset with its own seed needs no rebuild
        try:
            self._init_spaces(self.pool.observation_space, self.pool.action_space)
        except Exception:
            self.pool.close()
            raise
        act = self.pool.action_space
        self._idle_action = np.zeros((self.num_envs, *act.shape), dtype=act.dtype)  # ignored by a resetting env

    def _build(self, seed: int) -> Any:
        return _envpool().make(self.env_id, seed=seed, **self._make_kwargs)

    # ------------------------------------------------------------------ public API

    def reset(self, seed: int | None = None) -> Obs:
        if seed is not None and (int(seed) != self._seed or not self._fresh):
            self.pool.close()
            self._seed = int(seed)
            self.pool = self._build(self._seed)
        self._fresh = False
        obs, info = self.pool.reset()
        return self._obs_to_torch(self._ordered(self._split(obs), self._order(info)), owned=False)

    def step(self, action: torch.Tensor) -> StepResult:
        obs, reward, terminated, truncated, info = self.pool.step(self._action_to_numpy(action))
        order = self._order(info)
        obs_np = self._ordered(self._split(obs), order)
        if order is not None:
            reward, terminated, truncated = reward[order], terminated[order], truncated[order]
        done = np.logical_or(terminated, truncated)
        final_np, outcomes = None, {}
        if done.any():
            idx = np.flatnonzero(done).astype(np.int32)
            final_np = {k: v.copy() for k, v in obs_np.items()}
            outcomes = self._outcomes(info, order, done)
            first, _, _, _, first_info = self.pool.step(self._idle_action[: len(idx)], env_id=idx)
            rows = np.asarray(first_info["env_id"])
            obs_np = {k: v.copy() for k, v in obs_np.items()}  # EnvPool's buffers: write into a copy
            for key, arr in self._split(first).items():
                obs_np[key][rows] = arr
        return self._step_result(obs_np, final_np, reward, terminated, truncated, outcomes)

    def close(self) -> None:
        self.pool.close()

    def __repr__(self) -> str:
        return f"EnvPoolVecEnv({self.env_id!r}, num_envs={self.num_envs}, device={str(self.device)!r})"

    # ------------------------------------------------------------------ helpers

    def _order(self, info: dict[str, Any]) -> np.ndarray | None:
        """The permutation putting a full batch in env-id order (None: already in order)."""
        ids = np.asarray(info["env_id"])
        return None if np.all(ids[1:] > ids[:-1]) else np.argsort(ids)

    @staticmethod
    def _ordered(obs_np: dict[str, np.ndarray], order: np.ndarray | None) -> dict[str, np.ndarray]:
        return obs_np if order is None else {k: v[order] for k, v in obs_np.items()}

    def _outcomes(self, info: dict[str, Any], order: np.ndarray | None, done: np.ndarray) -> dict[str, torch.Tensor]:
        out = {}
        for key, value in info.items():
            if key in _NOT_FORWARDED or not isinstance(value, np.ndarray) or value.dtype != np.bool_:
                continue
            if value.shape != (self.num_envs,):
                continue
            flags = (value if order is None else value[order]) & done
            out[key] = torch.from_numpy(np.ascontiguousarray(flags)).to(self.device)
        return out
