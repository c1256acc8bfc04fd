"""Episode bookkeeping shared by every sampler: running return and length per env, and the
record from which a rollout's completed episodes (:class:`rl_system.rollout.contract.Episodes`) are read."""

from __future__ import annotations

import torch

from rl_system.rollout.contract import Episodes


class EpisodeTracker:
    """Running return/length per env and a per-step ``[T, N]`` record, allocated once (boolean
    info keys on first sight; the numeric ``stats`` keys, the env's ``episode_stats``, up front), so
    reading a rollout's finished episodes is one mask per column. With ``num_agents``, each agent's
    own return is kept beside the team's (``[N, n]``, ``[T, N, n]``)."""

    def __init__(self, rollout_len: int, num_envs: int, device: torch.device, num_agents: int = 0,
                 stats: tuple[str, ...] = ()):
        self.T, self.N, self.device = rollout_len, num_envs, device
        self.agent_ret = torch.zeros(num_envs, num_agents, device=device) if num_agents else None
        self.agent_ret_at = torch.zeros(rollout_len, num_envs, num_agents, device=device) if num_agents else None
        self.ret = torch.zeros(num_envs, device=device)
        self.length = torch.zeros(num_envs, dtype=torch.int32, device=device)
        self.ret_at = torch.zeros(rollout_len, num_envs, device=device)
        self.length_at = torch.zeros(rollout_len, num_envs, dtype=torch.int32, device=device)
        self.done_at = torch.zeros(rollout_len, num_envs, dtype=torch.bool, device=device)
        self.info_at: dict[str, torch.Tensor] = {}
        self.stat_at = {key: torch.zeros(rollout_len, num_envs, device=device) for key in stats}  # float32 [T, N]
        # Step t's rows of the record, and the constants a step uses, made once (a step is ~100
        # small ops, where indexing and wrapping a Python number cost as much as the op).
        self._ret_rows, self._length_rows, self._done_rows = (x.unbind(0) for x in (self.ret_at, self.length_at, self.done_at))
        self._one = torch.ones((), dtype=torch.int32, device=device)
        self._zero_ret = torch.zeros((), device=device)
        self._zero_length = torch.zeros((), dtype=torch.int32, device=device)

    def reset(self) -> None:
        self.ret.zero_()
        self.length.zero_()
        if self.agent_ret is not None:
            self.agent_ret.zero_()

    def record(self, t: int, reward: torch.Tensor, done: torch.Tensor, info: dict[str, torch.Tensor],
               agent_reward: torch.Tensor | None = None) -> None:
        """Step ``t``: ``reward [N]``, ``done [N]`` (terminated or truncated), the env's ``info``;
        with ``num_agents``, ``agent_reward [N, n]``, each agent's own."""
        ret_t, length_t = self._ret_rows[t], self._length_rows[t]
        if self.agent_ret is not None:
            agent_t = self.agent_ret_at[t]
            torch.add(self.agent_ret, agent_reward, out=agent_t)
            torch.where(done.unsqueeze(1), self._zero_ret, agent_t, out=self.agent_ret)
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
        for key, record in self.stat_at.items():
            value = info.get(key)
            if value is None:
                raise KeyError(f"episode_stats names {key!r}, which the env's info does not hold "
                               f"(it holds {sorted(info)})")
            record[t].copy_(value)
        # The next step's running return and length: this step's, or 0 where an episode ended.
        torch.where(done, self._zero_ret, ret_t, out=self.ret)
        torch.where(done, self._zero_length, length_t, out=self.length)

    def completed(self) -> Episodes:
        """The episodes that ended in this rollout, in time order."""
        done = self.done_at
        env_index = torch.arange(self.N, device=self.device).expand(self.T, self.N)
        return Episodes(returns=self.ret_at[done], lengths=self.length_at[done], env=env_index[done],
                        outcomes={k: v[done] for k, v in (self.info_at | self.stat_at).items()},
                        agent_returns=None if self.agent_ret_at is None else self.agent_ret_at[done])

    def state_dict(self) -> dict[str, torch.Tensor]:
        state = {"ep_return": self.ret.clone(), "ep_length": self.length.clone()}
        if self.agent_ret is not None:
            state["ep_agent_return"] = self.agent_ret.clone()
        return state

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        self.ret.copy_(state["ep_return"])
        self.length.copy_(state["ep_length"])
        if self.agent_ret is not None:  # a checkpoint from before per-agent returns starts them at 0
            self.agent_ret.copy_(state.get("ep_agent_return", torch.zeros_like(self.agent_ret)))
