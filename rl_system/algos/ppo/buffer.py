"""PPO's preallocated rollout storage: one ``[T, N, ...]`` tensor per column, written by index
(column layouts: :mod:`rl_system.rollout.contract`).

Columns (``T = rollout_len``, ``N = num_envs``):

=====================  ===============  ====================================================
``obs.<key>``          ``[T, N, *s]``   observation the action was taken on
``action``             ``[T, N(, A)]``  sampled action
``logp``               ``[T, N]``       log-prob of the action under the behaviour policy
``value``              ``[T, N]``       critic value of ``obs``
``reward``             ``[T, N]``       env reward
``terminated``         ``[T, N]``       the step ended the episode in a terminal state
``truncated``          ``[T, N]``       the step ended the episode by a time limit
``trunc_value``        ``[T, N]``       ``V(final_obs)`` where truncated, else 0 (bootstrap)
``disc_return``        ``[T, N]``       running discounted return (only with ``normalize_reward``)
``last_value``         ``[N]``          ``V(obs_T)``, bootstraps the end of the rollout
``init_state``         ``[N, S]``       recurrent state before the first step (recurrent only)
=====================  ===============  ====================================================
"""

from __future__ import annotations

from types import SimpleNamespace

import torch

from rl_system.algos.ppo import columns as col
from rl_system.envs.base import ActionSpec, TensorSpec
from rl_system.rollout.contract import Columns, obs_column

_STEP = (col.ACTION, col.LOGP, col.VALUE, col.REWARD, col.TERMINATED, col.TRUNCATED, col.TRUNC_VALUE)
"""The step columns every rollout holds; each is the buffer's attribute of the same name."""


class RolloutBuffer:
    def __init__(self, rollout_len: int, num_envs: int, obs_spec: dict[str, TensorSpec],
                 action_spec: ActionSpec, device: torch.device, disc_return: bool = False,
                 state_size: int = 0):
        T, N = rollout_len, num_envs
        self.rollout_len, self.num_envs = T, N

        def alloc(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
            return torch.zeros((T, N, *shape), dtype=dtype, device=device)

        self.obs = {k: alloc(*s.shape, dtype=s.dtype) for k, s in obs_spec.items()}
        self.action = alloc(*action_spec.shape, dtype=action_spec.dtype)
        self.logp = alloc()
        self.value = alloc()
        self.reward = alloc()
        self.terminated = alloc(dtype=torch.bool)
        self.truncated = alloc(dtype=torch.bool)
        self.trunc_value = alloc()
        self.last_value = torch.zeros(N, device=device)
        self.disc_return = alloc() if disc_return else None
        self.init_state = torch.zeros(N, state_size, device=device) if state_size else None

    def rows(self) -> list[SimpleNamespace]:
        """Per step ``t``, the ``[N, ...]`` views ``column[t]`` of the step columns (``obs`` a dict
        by key): made once, so a sampler's step writes without indexing."""
        cols = {name: getattr(self, name) for name in (*_STEP, col.DISC_RETURN) if getattr(self, name) is not None}
        return [SimpleNamespace(obs={k: v[t] for k, v in self.obs.items()}, **{k: v[t] for k, v in cols.items()})
                for t in range(self.rollout_len)]

    def columns(self) -> Columns:
        """The columns a learner needs, by name (views, no copies)."""
        cols = {obs_column(k): v for k, v in self.obs.items()}
        cols.update({name: getattr(self, name) for name in (*_STEP, col.LAST_VALUE)})
        if self.disc_return is not None:
            cols[col.DISC_RETURN] = self.disc_return
        if self.init_state is not None:
            cols[col.INIT_STATE] = self.init_state
        return cols
