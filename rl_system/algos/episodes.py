"""Episode bookkeeping shared by every sampler: running return and length per env, and the
record from which a rollout's completed episodes (:class:`rl_system.rollout.contract.Episodes`) are read."""

from __future__ import annotations

import torch

from rl_system.rollout.contract import Episodes


class EpisodeTracker:
    """Running return/length per env and a per-step ``[T, N]`` record, allocated once (boolean
    info keys on first sight), so reading a rollout's finished episodes is one mask per column."""

    def __init__(self, rollout_len: int, num_envs: int, device: torch.device):
        self.T, self.N, self.device = rollout_len, num_envs, device
        self.ret = torch.zeros(num_envs, device=device)
        self.length = torch.zeros(num_envs, dtype=torch.int32, device=device)
        self.ret_at = torch.zeros(rollout_len, num_envs, device=device)
        self.length_at = torch.zeros(rollout_len, num_envs, dtype=torch.int32, device=device)
        self.done_at = torch.zeros(rollout_len, num_envs, dtype=torch.bool, device=device)
        self.info_at: dict[str, torch.Tensor] = {}
        # Step t's rows of the record, and the constants a step uses, made once (a step is ~100
        # small ops, where indexing and wrapping a Python number cost as much as the op).
        self._ret_rows, self._length_rows, self._done_rows = (x.unbind(0) for x in (self.ret_at, self.length_at, self.done_at))
        self._one = torch.ones((), dtype=torch.int32, device=device)
        self._zero_ret = torch.zeros((), device=device)
        self._zero_length = torch.zeros((), dtype=torch.int32, device=device)

    def reset(self) -> None:
        self.ret.zero_()
        self.length.zero_()

    def record(self, t: int, reward: torch.Tensor, done: torch.Tensor, info: dict[str, torch.Tensor]) -> None:
        """Step ``t``: ``reward [N]``, ``done [N]`` (terminated or truncated), the env's ``info``."""
        ret_t, length_t = self._ret_rows[t], self._length_rows[t]
        torch.add(self.ret, reward, out=ret_t)
        torch.add(self.length, self._one, out=length_t)
        self._done_rows[t].copy_(done)
        for key, value in info.items():
            if value.dtype == torch.bool and value.shape == (self.N,) and key not in self.info_at:
                with torch.inference_mode(False):  # an ordinary tensor, as those made in __init__
                    self.info_at[key] = torch.zeros(self.T, self.N, dtype=torch.bool, device=self.device)
        for key, record in self.info_at.items():
            # A key an env reports only on some steps (Gymnasium's final_info) reads False where absent.
            value = info.get(key)
            if value is None:
                record[t].zero_()
            else:
                record[t].copy_(value)
        # The next step's running return and length: this step's, or 0 where an episode ended.
        torch.where(done, self._zero_ret, ret_t, out=self.ret)
        torch.where(done, self._zero_length, length_t, out=self.length)

    def completed(self) -> Episodes:
        """The episodes that ended in this rollout, in time order."""
        done = self.done_at
        env_index = torch.arange(self.N, device=self.device).expand(self.T, self.N)
        return Episodes(returns=self.ret_at[done], lengths=self.length_at[done], env=env_index[done],
                        outcomes={k: v[done] for k, v in self.info_at.items()})

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {"ep_return": self.ret.clone(), "ep_length": self.length.clone()}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        self.ret.copy_(state["ep_return"])
        self.length.copy_(state["ep_length"])
