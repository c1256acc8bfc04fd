"""Our torch envs as Gymnasium environments: ``gymnasium.make_vec`` / ``gymnasium.make`` by id.

Importing this module registers, with :func:`gymnasium.register`:

==============================  ==========================================================
id                              env (``rl_system.envs.make_env`` name)
==============================  ==========================================================
``rl_system/CartPole-v0``       ``CartPole`` (:mod:`rl_system.envs.cartpole`)
``rl_system/Navigation-v0``     ``Navigation`` (:mod:`rl_system.envs.navigation`)
``rl_system/AirCombat-v0``      ``AirCombat`` (:mod:`rl_system.envs.air_combat`)
==============================  ==========================================================

each with a ``vector_entry_point`` (:class:`TorchVectorEnv`: the whole batch is one torch env,
stepped as tensors) and an ``entry_point`` (:class:`TorchEnv`: one env, the same torch env with
``num_envs=1``)::

    import gymnasium
    import rl_system.envs.gym_vector  # registers the ids (or use the id "rl_system.envs.gym_vector:rl_system/Navigation-v0")

    vec = gymnasium.make_vec("rl_system/Navigation-v0", num_envs=8)       # TorchVectorEnv
    env = gymnasium.make("rl_system/AirCombat-v0", time_scale=4.0)        # TorchEnv
    vec = gymnasium.make_vec("rl_system/CartPole-v0", num_envs=8, vectorization_mode="sync")  # 8 TorchEnv

Keyword arguments reach the env's constructor (``device="cuda"``, ``num_static=8``, ...).
Gymnasium's ``"module:id"`` form (``"rl_system.envs.gym_vector:rl_system/Navigation-v0"``) imports this
module first, which is what a process that has not imported it (an RLlib EnvRunner) needs.
:func:`register_gym_env` registers any other name of :func:`rl_system.envs.make_env`.

Spaces and data (torch tensors <-> numpy at the boundary, copied: a caller may keep what it got)
    * Observations: an env whose observation is just ``{"obs": ...}`` (CartPole) gets a ``Box``;
      any other gets a ``spaces.Dict`` with one entry per key (Navigation: ``state``, ``lidar``,
      ``direction``, ``dynamic_obstacle``; AirCombat: ``obs`` and ``action_mask``). Float entries
      are ``Box`` (the spec's bounds, else ``±inf``), bool entries such as the action mask are
      ``MultiBinary`` (int8 0/1: ``1`` = legal), integer entries ``Box`` of that dtype.
    * Actions: ``Discrete(n)`` -> ``spaces.Discrete(n)``; ``Box`` -> ``spaces.Box`` (float32);
      a multi-agent ``AgentDiscrete`` -> ``spaces.MultiDiscrete``. The vector env's spaces are
      the batched ones (``gymnasium.vector.utils.batch_space``).
    * Rewards float64 ``[N]``, ``terminated`` / ``truncated`` bool ``[N]``.

Autoreset (vector env)
    ``metadata["autoreset_mode"] = AutoresetMode.SAME_STEP``, as the torch envs do it: where an
    env is done, the returned observation is already the first one of its next episode, and
    ``infos["final_obs"]`` (an object array; ``None`` where not done) holds the observation the
    episode ended on, with the mask ``infos["_final_obs"]``. The env's per-step info entries
    (``success``/``collision`` of Navigation, ``outcome`` of AirCombat: valid where done) go to
    ``infos["final_info"]`` (with ``_<key>`` masks) and ``infos["_final_info"]`` = done.
    The single env (:class:`TorchEnv`) follows the plain ``gymnasium.Env`` contract: on the
    final step it returns the final observation and that step's info; the next ``reset()``
    returns the episode the torch env already drew (``reset(seed=...)`` draws afresh).

Seeding
    The batch has one ``torch.Generator``: ``reset(seed=s)`` (an int) reseeds it, so equal seeds
    give equal observations; ``reset()`` continues its stream. A list of per-env seeds is not
    supported (``ValueError``). The constructor's ``seed`` seeds the generator up front.

RLlib (2.60) note: its ``SingleAgentEnvRunner`` assumes ``NEXT_STEP`` autoreset, so give it the
single-env entry point (``gym_env_vectorize_mode="sync"``, RLlib's default), not
``vector_entry_point``; see ``examples/rllib_navigation.py`` and ``docs/ecosystem.md``.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
import torch
from gymnasium import spaces
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from rl_system.envs import make_env
from rl_system.envs.base import AgentDiscrete, Box, Discrete, TensorSpec, VecEnv

#: rl_system.envs.make_env name -> Gymnasium id, registered on import.
GYM_IDS: dict[str, str] = {
    "CartPole": "rl_system/CartPole-v0",
    "Navigation": "rl_system/Navigation-v0",
    "AirCombat": "rl_system/AirCombat-v0",
}

_SINGLE_KEY = "obs"


# --------------------------------------------------------------------------- spaces


def _numpy_dtype(dtype: torch.dtype) -> np.dtype:
    return torch.empty(0, dtype=dtype).numpy().dtype


def _entry_space(spec: TensorSpec) -> spaces.Space:
    if spec.dtype == torch.bool:
        return spaces.MultiBinary(list(spec.shape) if spec.shape else 1)
    dtype = _numpy_dtype(spec.dtype)
    if np.issubdtype(dtype, np.floating):
        low = -np.inf if spec.low is None else spec.low
        high = np.inf if spec.high is None else spec.high
        return spaces.Box(low=low, high=high, shape=spec.shape, dtype=dtype)
    info = np.iinfo(dtype)
    low = info.min if spec.low is None else int(spec.low)
    high = info.max if spec.high is None else int(spec.high)
    return spaces.Box(low=low, high=high, shape=spec.shape, dtype=dtype)


def observation_space(obs_spec: dict[str, TensorSpec]) -> spaces.Space:
    """One env's observation space: a ``Box`` for ``{"obs": ...}`` alone, else a ``Dict``."""
    if set(obs_spec) == {_SINGLE_KEY}:
        return _entry_space(obs_spec[_SINGLE_KEY])
    return spaces.Dict({k: _entry_space(s) for k, s in obs_spec.items()})


def action_space(action_spec: Discrete | Box | AgentDiscrete) -> spaces.Space:
    """One env's action space."""
    if isinstance(action_spec, AgentDiscrete):
        return spaces.MultiDiscrete([action_spec.n] * action_spec.num_agents)
    if isinstance(action_spec, Discrete):
        return spaces.Discrete(action_spec.n)
    if isinstance(action_spec, Box):
        return spaces.Box(low=np.asarray(action_spec.low, dtype=np.float32).reshape(action_spec.shape),
                          high=np.asarray(action_spec.high, dtype=np.float32).reshape(action_spec.shape),
                          shape=action_spec.shape, dtype=np.float32)
    raise TypeError(f"unsupported action spec {action_spec!r}")


# --------------------------------------------------------------------------- conversions


def _to_numpy(t: torch.Tensor, bool_as_int8: bool = True) -> np.ndarray:
    """A fresh numpy copy (the torch env may reuse the tensor's storage on the next step); bool
    observation entries become int8 0/1 (``MultiBinary``)."""
    t = t.detach()
    if bool_as_int8 and t.dtype == torch.bool:
        t = t.to(torch.int8)
    return np.array(t.cpu().numpy(), copy=True)


class _Converter:
    """torch <-> numpy for one torch env: observations, actions, infos."""

    def __init__(self, env: VecEnv) -> None:
        self.env = env
        self.single_obs = observation_space(env.observation_spec)
        self.single_act = action_space(env.action_spec)
        self.flat = set(env.observation_spec) == {_SINGLE_KEY}
        self.discrete = isinstance(env.action_spec, (Discrete, AgentDiscrete))
        self.action_shape = tuple(env.action_spec.shape)

    def obs(self, obs: dict[str, torch.Tensor]) -> Any:
        """Batched torch observations -> batched numpy (array or dict of arrays)."""
        if self.flat:
            return _to_numpy(obs[_SINGLE_KEY])
        return {k: _to_numpy(obs[k]) for k in self.env.observation_spec}

    @staticmethod
    def row(batched: Any, i: int) -> Any:
        """Env ``i``'s observation out of a batched numpy one (copies)."""
        if isinstance(batched, dict):
            return {k: v[i].copy() for k, v in batched.items()}
        return batched[i].copy()

    def action(self, action: Any, n: int) -> torch.Tensor:
        """numpy (or list / scalar) actions of ``n`` envs -> the torch env's action tensor."""
        a = np.asarray(action)
        shape = (n, *self.action_shape)
        if a.size != int(np.prod(shape)):
            raise ValueError(f"expected actions of shape {shape}, got {a.shape}")
        a = a.reshape(shape)
        if self.discrete:
            if not np.issubdtype(a.dtype, np.integer):
                if not np.all(np.equal(np.mod(a, 1), 0)):
                    raise ValueError(f"discrete actions must be integers, got {a.dtype} values {a}")
            return torch.as_tensor(a.astype(np.int64), device=self.env.device)
        return torch.as_tensor(a.astype(np.float32), device=self.env.device)


def _check_seed(seed: Any) -> int | None:
    if seed is None or isinstance(seed, (int, np.integer)):
        return None if seed is None else int(seed)
    raise ValueError(f"seed must be an int or None (one generator seeds the whole batch), got {seed!r}")


# --------------------------------------------------------------------------- vector env


class TorchVectorEnv(gymnasium.vector.VectorEnv):
    """``num_envs`` copies of the torch env ``env_name`` as a Gymnasium ``VectorEnv`` (SAME_STEP
    autoreset); see the module docstring. Extra keyword arguments go to the env constructor."""

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}

    def __init__(self, env_name: str, num_envs: int = 1, device: str | torch.device = "cpu",
                 seed: int | None = None, **kwargs: Any) -> None:
        self.env_name = env_name
        self.env = make_env(env_name, num_envs, device, seed=seed, **kwargs)
        self.num_envs = self.env.num_envs
        self._conv = _Converter(self.env)
        self.single_observation_space = self._conv.single_obs
        self.single_action_space = self._conv.single_act
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._needs_reset = True

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        seed = _check_seed(seed)
        super().reset(seed=seed)
        obs = self.env.reset(seed=seed)
        self._needs_reset = False
        return self._conv.obs(obs), {}

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        if self._needs_reset:
            raise gymnasium.error.ResetNeeded("call reset() before step()")
        out = self.env.step(self._conv.action(actions, self.num_envs))
        obs = self._conv.obs(out.obs)
        reward = out.reward.detach().cpu().numpy().astype(np.float64)
        terminated = out.terminated.detach().cpu().numpy().astype(bool)
        truncated = out.truncated.detach().cpu().numpy().astype(bool)
        done = terminated | truncated
        infos: dict[str, Any] = {}
        if done.any():
            final = self._conv.obs(out.final_obs)
            final_obs = np.full(self.num_envs, None, dtype=object)
            for i in np.flatnonzero(done):
                final_obs[i] = self._conv.row(final, int(i))
            infos["final_obs"], infos["_final_obs"] = final_obs, done.copy()
            final_info: dict[str, Any] = {}
            for key, value in out.info.items():
                final_info[key] = _to_numpy(value, bool_as_int8=False)
                final_info[f"_{key}"] = done.copy()
            infos["final_info"], infos["_final_info"] = final_info, done.copy()
        return obs, reward, terminated, truncated, infos

    def close_extras(self, **kwargs: Any) -> None:
        self.env.close()

    def __repr__(self) -> str:
        return f"TorchVectorEnv({self.env_name}, num_envs={self.num_envs})"


# --------------------------------------------------------------------------- single env


class TorchEnv(gymnasium.Env):
    """One torch env ``env_name`` (a batch of 1) as a plain ``gymnasium.Env``."""

    metadata = {"render_modes": []}

    def __init__(self, env_name: str, device: str | torch.device = "cpu", seed: int | None = None,
                 **kwargs: Any) -> None:
        self.env_name = env_name
        self.env = make_env(env_name, 1, device, seed=seed, **kwargs)
        self._conv = _Converter(self.env)
        self.observation_space = self._conv.single_obs
        self.action_space = self._conv.single_act
        self._next_obs: Any = None  # the episode the torch env drew when the last one ended
        self._started = False

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        seed = _check_seed(seed)
        super().reset(seed=seed)
        if seed is None and self._next_obs is not None:
            obs = self._next_obs  # already drawn by the torch env's autoreset
        else:
            obs = self._conv.row(self._conv.obs(self.env.reset(seed=seed)), 0)
        self._next_obs = None
        self._started = True
        return obs, {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        if not self._started:
            raise gymnasium.error.ResetNeeded("call reset() before step()")
        out = self.env.step(self._conv.action(action, 1))
        terminated, truncated = bool(out.terminated[0]), bool(out.truncated[0])
        info: dict[str, Any] = {k: v[0].item() if v[0].numel() == 1 else _to_numpy(v[0], bool_as_int8=False)
                                for k, v in out.info.items()}
        if terminated or truncated:
            obs = self._conv.row(self._conv.obs(out.final_obs), 0)
            self._next_obs = self._conv.row(self._conv.obs(out.obs), 0)
            self._started = False
        else:
            obs = self._conv.row(self._conv.obs(out.obs), 0)
        return obs, float(out.reward[0]), terminated, truncated, info

    def close(self) -> None:
        self.env.close()

    def __repr__(self) -> str:
        return f"TorchEnv({self.env_name})"


# --------------------------------------------------------------------------- registration


def register_gym_env(env_name: str, gym_id: str | None = None) -> str:
    """Register ``rl_system.envs.make_env`` name ``env_name`` with Gymnasium (vector and single entry
    points) under ``gym_id`` (default ``rl_system/<env_name>-v0``); returns the id. Registering
    an id again is a no-op."""
    gym_id = gym_id or f"rl_system/{env_name}-v0"
    if gym_id not in gymnasium.registry:
        gymnasium.register(
            gym_id,
            entry_point=f"{__name__}:TorchEnv",
            vector_entry_point=f"{__name__}:TorchVectorEnv",
            kwargs={"env_name": env_name},
        )
    return gym_id


for _name, _id in GYM_IDS.items():
    register_gym_env(_name, _id)


__all__ = ["GYM_IDS", "TorchEnv", "TorchVectorEnv", "action_space", "observation_space", "register_gym_env"]
