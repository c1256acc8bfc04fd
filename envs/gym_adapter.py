"""Any Gymnasium env id as a :class:`rl_system.envs.base.VecEnv`.

``GymnasiumVecEnv("Acrobot-v1", num_envs=8)`` builds ``gymnasium.make_vec(...)`` with
``vectorization_mode`` ``"sync"`` (default; all copies in this process) or ``"async"`` (one
subprocess per copy) and Gymnasium's ``SAME_STEP`` autoreset, then converts between numpy and
torch at the API boundary:

Observation spaces
    * ``Box`` -> ``{"obs": float32 [N, *shape]}``; a uint8 ``Box`` (pixels) stays uint8 and a bool
      one (MinAtar's planes) bool, so images cost 1 byte per value in buffers and on the wire
    * ``Discrete`` -> ``{"obs": int64 [N]}`` (values as Gymnasium gives them, ``start`` included)
    * ``MultiBinary`` / ``MultiDiscrete`` -> ``{"obs": int64 [N, *shape]}``
    * ``Dict`` of the above -> one entry per key (``{"pos": ..., "goal": ...}``). A key
      ``"action_mask"`` carries the legal-action flags (:mod:`rl_system.envs.base`): it must be a
      ``MultiBinary`` or 0/1 ``Box`` as wide as the action's mask, and becomes a bool entry; any
      other space under that key collides with the mask and raises ``ValueError``.
    * anything else (``Tuple``, ``Graph``, ``Text``, nested ``Dict``, ...) raises ``TypeError``.
Action spaces
    * ``Discrete(n, start)`` -> ``Discrete(n)``; actions are ``0..n-1`` (an integer tensor) and
      ``start`` is added before they reach Gymnasium.
    * 1-D ``MultiDiscrete(nvec, start)`` -> ``MultiDiscrete(nvec)`` (``start`` added likewise);
      ``MultiBinary(k)`` -> ``MultiDiscrete((2,) * k)``.
    * ``Box`` -> ``Box(shape, low, high)`` with the bounds flattened to tuples; actions are cast
      to float32, clipped to the bounds and then cast to the space's dtype.
    * anything else raises ``TypeError``.

``final_obs`` comes from Gymnasium's ``info["final_obs"]`` / ``info["_final_obs"]``: where an
env is done it holds the observation its episode ended on. On steps where no env is done the
returned ``final_obs`` tensors *are* the ``obs`` tensors (no copy; ``final_obs`` is only
meaningful where done). Rewards are float32 ``[N]``, ``terminated``/``truncated`` bool ``[N]``.

``info``: every boolean entry of the info an episode *ended* with (Gymnasium's
``info["final_info"]``, e.g. ``is_success``) comes back as a bool ``[N]`` tensor, False for envs
that did not end on this step; the samplers report them as outcome rates at episode end. Other
info entries are not forwarded.

Seeding: the constructor's ``seed`` is used by the first ``reset()``; Gymnasium seeds copy ``i``
with ``seed + i``. Later ``reset()`` calls without a seed continue the envs' own RNG streams.
"""

from __future__ import annotations

from typing import Any, Callable

import gymnasium
import numpy as np
import torch
from gymnasium import spaces

from rl_system.envs.base import (
    ACTION_MASK,
    Box,
    Discrete,
    MultiDiscrete,
    Obs,
    StepResult,
    TensorSpec,
    VecEnv,
    check_action,
)

_MODES = ("sync", "async")
_CPU = torch.device("cpu")  # Gymnasium takes numpy actions


def _scalar_bound(values: np.ndarray) -> float | None:
    """The bound as a float if it is the same for every dimension, else ``None``."""
    flat = np.asarray(values, dtype=np.float64).reshape(-1)
    if flat.size == 0 or not np.all(flat == flat[0]):
        return None
    return float(flat[0])


_KEPT_DTYPES = {np.dtype(np.uint8): torch.uint8, np.dtype(np.bool_): torch.bool}


def _obs_entry_spec(space: spaces.Space, where: str) -> TensorSpec:
    if isinstance(space, spaces.Box):
        # Images keep their dtype (uint8 pixels, bool MinAtar planes): 4x (32x) fewer bytes in
        # the buffers and on the wire than float32; the policy's encoder scales them.
        dtype = _KEPT_DTYPES.get(np.dtype(space.dtype), torch.float32)
        return TensorSpec(tuple(space.shape), dtype, _scalar_bound(space.low), _scalar_bound(space.high))
    if isinstance(space, spaces.Discrete):
        start = int(space.start)
        return TensorSpec((), torch.int64, float(start), float(start + int(space.n) - 1))
    if isinstance(space, spaces.MultiBinary):
        return TensorSpec(tuple(space.shape), torch.int64, 0.0, 1.0)
    if isinstance(space, spaces.MultiDiscrete):
        start = np.asarray(space.start)
        return TensorSpec(tuple(space.shape), torch.int64, _scalar_bound(start),
                          _scalar_bound(start + np.asarray(space.nvec) - 1))
    raise TypeError(
        f"unsupported Gymnasium observation space {where}: {space!r} ({type(space).__name__}); supported are "
        "Box, Discrete, MultiBinary, MultiDiscrete and a Dict of those")


def _mask_spec(space: spaces.Space) -> TensorSpec:
    """The Dict entry ``action_mask``: 0/1 flags, as a bool entry (width checked by make_env)."""
    binary_box = (isinstance(space, spaces.Box) and np.all(space.low >= 0) and np.all(space.high <= 1))
    if not (isinstance(space, spaces.MultiBinary) or binary_box) or len(space.shape) != 1:
        raise ValueError(f"Dict observation key {ACTION_MASK!r} collides with the legal-action flags: it must be "
                         f"a 1-D MultiBinary (or a 0/1 Box), got {space!r}; rename the key if it is something else")
    return TensorSpec(tuple(space.shape), torch.bool)


def _observation_spec(space: spaces.Space) -> dict[str, TensorSpec]:
    if isinstance(space, spaces.Dict):
        specs = {}
        for key, sub in space.spaces.items():
            if not isinstance(key, str):
                raise TypeError(f"Dict observation space keys must be str, got {key!r} in {space!r}")
            specs[key] = _mask_spec(sub) if key == ACTION_MASK else _obs_entry_spec(sub, f"entry {key!r} of Dict")
        return specs
    return {"obs": _obs_entry_spec(space, "")}


def _action_spec(space: spaces.Space) -> Discrete | MultiDiscrete | Box:
    if isinstance(space, spaces.Discrete):
        return Discrete(int(space.n))
    if isinstance(space, spaces.MultiDiscrete) and len(space.shape) == 1:
        return MultiDiscrete(tuple(int(n) for n in space.nvec))
    if isinstance(space, spaces.MultiBinary) and len(space.shape) == 1:
        return MultiDiscrete((2,) * int(space.shape[0]))
    if isinstance(space, spaces.Box):
        return Box(tuple(space.shape), tuple(float(v) for v in space.low.reshape(-1)),
                   tuple(float(v) for v in space.high.reshape(-1)))
    raise TypeError(f"unsupported Gymnasium action space {space!r} ({type(space).__name__}); "
                    "supported are Discrete, 1-D MultiDiscrete, 1-D MultiBinary and Box")


class NumpyBatchEnv(VecEnv):
    """The numpy <-> torch boundary of a batch of envs that speak Gymnasium's spaces (this
    module's Gymnasium adapter and :class:`rl_system.envs.envpool_adapter.EnvPoolVecEnv`): the specs of the
    single-env spaces, observations to torch (one copy at most) and actions to numpy."""

    def _init_batch(self, env_id: str, num_envs: int, device: str | torch.device) -> None:
        """The batch's id, size (``ValueError`` below 1) and device."""
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        self.env_id = env_id
        self.num_envs = int(num_envs)
        self.device = torch.device(device)

    def _init_spaces(self, obs_space: spaces.Space, act_space: spaces.Space) -> None:
        """Set ``observation_spec`` / ``action_spec`` and the conversions from one env's spaces."""
        self.observation_spec = _observation_spec(obs_space)
        self.action_spec = _action_spec(act_space)
        self._dict_obs = isinstance(obs_space, spaces.Dict)
        self._obs_dtypes = {k: s.dtype for k, s in self.observation_spec.items()}
        self._act_space = act_space
        if isinstance(act_space, spaces.Box):
            self._act_low = torch.as_tensor(act_space.low, dtype=torch.float32)
            self._act_high = torch.as_tensor(act_space.high, dtype=torch.float32)
            self._action_to_numpy: Callable[[torch.Tensor], np.ndarray] = self._box_action
        else:
            start = getattr(act_space, "start", 0)  # MultiBinary has none
            self._action_start = start if np.any(start) else None
            self._action_to_numpy = self._discrete_action

    def _split(self, obs: Any) -> dict[str, np.ndarray]:
        return {key: obs[key] for key in self.observation_spec} if self._dict_obs else {"obs": obs}

    def _obs_to_torch(self, obs_np: dict[str, np.ndarray], owned: bool) -> Obs:
        """numpy -> torch with one copy at most; ``owned=False`` means the arrays are the
        simulator's reused buffers, so a result that would alias them is cloned."""
        out = {}
        for key, arr in obs_np.items():
            src = torch.from_numpy(np.ascontiguousarray(arr))
            t = src.to(self.device, self._obs_dtypes[key])
            if not owned and t.data_ptr() == src.data_ptr():
                t = t.clone()
            out[key] = t
        return out

    def _step_result(self, obs_np: dict[str, np.ndarray], final_np: dict[str, np.ndarray] | None, reward: Any,
                     terminated: Any, truncated: Any, outcomes: dict[str, torch.Tensor]) -> StepResult:
        """One step's torch result; ``final_np`` None where no env is done (``final_obs`` is
        then the ``obs`` tensors themselves)."""
        obs = self._obs_to_torch(obs_np, owned=False)
        final_obs = dict(obs) if final_np is None else self._obs_to_torch(final_np, owned=True)
        return StepResult(
            obs,
            torch.from_numpy(np.asarray(reward, dtype=np.float32)).to(self.device),
            torch.from_numpy(np.asarray(terminated, dtype=np.bool_)).to(self.device),
            torch.from_numpy(np.asarray(truncated, dtype=np.bool_)).to(self.device),
            final_obs,
            outcomes,
        )

    def _discrete_action(self, action: torch.Tensor) -> np.ndarray:
        a = check_action(action.detach(), self.action_spec, self.num_envs, _CPU).numpy()
        return a + self._action_start if self._action_start is not None else a

    def _box_action(self, action: torch.Tensor) -> np.ndarray:
        a = check_action(action.detach(), self.action_spec, self.num_envs, _CPU)
        a = torch.clamp(a, self._act_low, self._act_high)
        return a.numpy().astype(self._act_space.dtype, copy=False)


class GymnasiumVecEnv(NumpyBatchEnv):
    """``num_envs`` copies of Gymnasium env ``env_id`` behind the torch ``VecEnv`` API.

    ``env_kwargs`` go to the env constructor (``gymnasium.make_vec(id, ..., **env_kwargs)``).
    Unknown ids raise ``ValueError``; unsupported spaces ``TypeError``.
    """

    def __init__(self, env_id: str, num_envs: int, device: str | torch.device = "cpu", seed: int | None = None,
                 vectorization_mode: str = "sync", **env_kwargs: Any) -> None:
        mode = getattr(vectorization_mode, "value", vectorization_mode)
        if mode not in _MODES:
            raise ValueError(
                f"vectorization_mode must be one of {_MODES}, got {vectorization_mode!r} (\"vector_entry_point\" "
                "envs use their own autoreset mode and reject the SAME_STEP setting this adapter needs)")
        self._init_batch(env_id, num_envs, device)
        self._seed = seed
        self._seed_pending = True
        try:
            self.gym_env = gymnasium.make_vec(
                env_id, num_envs=self.num_envs, vectorization_mode=mode,
                # copy=False: the conversion below copies (or clones) exactly once.
                vector_kwargs={"autoreset_mode": gymnasium.vector.AutoresetMode.SAME_STEP, "copy": False},
                **env_kwargs)
        except (gymnasium.error.UnregisteredEnv, gymnasium.error.DeprecatedEnv) as e:
            raise ValueError(f"unknown Gymnasium env id {env_id!r}: {e}") from e
        try:
            self._init_spaces(self.gym_env.single_observation_space, self.gym_env.single_action_space)
        except Exception:
            self.gym_env.close()
            raise

    # ------------------------------------------------------------------ public API

    def reset(self, seed: int | None = None) -> Obs:
        if seed is None and self._seed_pending:
            seed = self._seed
        self._seed_pending = False
        obs, _ = self.gym_env.reset(seed=seed)
        return self._obs_to_torch(self._split(obs), owned=False)

    def step(self, action: torch.Tensor) -> StepResult:
        obs_np, reward, terminated, truncated, info = self.gym_env.step(self._action_to_numpy(action))
        obs_np = self._split(obs_np)
        mask = info.get("_final_obs")
        final_np, outcomes = None, {}
        if mask is not None and mask.any():
            idx = np.flatnonzero(mask)
            ended = info["final_obs"]
            final_np = {}
            for key, arr in obs_np.items():
                final = arr.copy()
                final[idx] = np.stack([ended[i][key] if self._dict_obs else ended[i] for i in idx])
                final_np[key] = final
            outcomes = self._outcomes(info)
        return self._step_result(obs_np, final_np, reward, terminated, truncated, outcomes)

    def _outcomes(self, info: dict[str, Any]) -> dict[str, torch.Tensor]:
        """The boolean entries of the info the ended episodes finished with, bool ``[N]`` (False
        where an env did not end, or did not report the key)."""
        final = info.get("final_info")
        if not isinstance(final, dict):
            return {}
        out = {}
        for key, value in final.items():
            if key.startswith("_") or not isinstance(value, np.ndarray) or value.dtype != np.bool_:
                continue
            if value.shape != (self.num_envs,):
                continue
            present = final.get("_" + key)
            flags = value & present if isinstance(present, np.ndarray) else value
            out[key] = torch.from_numpy(np.ascontiguousarray(flags)).to(self.device)
        return out

    def close(self) -> None:
        self.gym_env.close()

    def __repr__(self) -> str:
        return f"GymnasiumVecEnv({self.env_id!r}, num_envs={self.num_envs}, device={str(self.device)!r})"
