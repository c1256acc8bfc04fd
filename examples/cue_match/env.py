"""A small cooperative multi-agent env in the multi-agent contract of :mod:`rl_system.envs.base`:
per-agent observations and a global state, one action per agent (discrete with a per-agent action
mask, or continuous), per-agent rewards, and agents that can leave before the episode ends.

    rl-system train examples/cue_match/config.yaml      # MAPPO learns it in seconds
    rl-system train examples/cue_match/config_memory.yaml   # the cue shown once: recurrent MAPPO
"""

from __future__ import annotations

import torch

from rl_system.envs.base import (
    ACTION_MASK,
    AGENT_ACTIVE,
    AGENT_OBS,
    STATE,
    AgentBox,
    AgentDiscrete,
    StepResult,
    TensorSpec,
    VecEnv,
    make_generator,
)


class CueMatch(VecEnv):
    """``num_agents`` agents, each shown its own cue (one of ``k``, one-hot) every step; an agent
    earns 1 when its action names its cue (``continuous``: ``-|a - (2 cue / (k - 1) - 1)|``). The
    last agent has one action fewer than the others (masked), so the cue ``k - 1`` is never its
    own. Episodes last ``horizon`` steps (truncated); with ``early``, agent 0 leaves after half of
    them (inactive to the end). Random play earns ``1 / k`` a step; a learned policy 1.

    With ``memory`` each agent's cue is drawn once per episode and shown on its first step only
    (zeros in the observations and the state after): the agents must remember it. A policy without
    memory names it on the first step and guesses after: ``1 + (horizon - 1) / k`` an episode at
    best (the last agent's cue is 0 with probability ``2 / k``: ``1 + 2 (horizon - 1) / k``); one with memory
    earns ``horizon``."""

    def __init__(self, num_envs: int, device: str | torch.device = "cpu", seed: int | None = None,
                 num_agents: int = 2, k: int = 3, horizon: int = 8, continuous: bool = False, early: bool = False,
                 memory: bool = False):
        self.num_envs, self.num_agents, self.device = num_envs, num_agents, torch.device(device)
        self.k, self.horizon, self.continuous, self.early, self.memory = k, horizon, continuous, early, memory
        n = num_agents
        self.observation_spec = {STATE: TensorSpec((n * k,)), AGENT_OBS: TensorSpec((n, k))}
        if continuous:
            self.action_spec = AgentBox((1,), (-1.0,), (1.0,), n)
        else:
            self.action_spec = AgentDiscrete(k, n)
            self.observation_spec[ACTION_MASK] = TensorSpec((n, k), torch.bool)
        if early:
            self.observation_spec[AGENT_ACTIVE] = TensorSpec((n,), torch.bool)
        self.generator = make_generator(self.device, seed)
        self.t = torch.zeros(num_envs, dtype=torch.long, device=self.device)
        self.cue = torch.zeros(num_envs, n, dtype=torch.long, device=self.device)
        self.mask = torch.ones(n, k, dtype=torch.bool, device=self.device)
        self.mask[-1, -1] = False

    def _draw(self, rows: torch.Tensor | slice = slice(None)) -> None:
        cue = torch.randint(0, self.k, self.cue[rows].shape, generator=self.generator, device=self.device)
        cue[:, -1] = cue[:, -1] % (self.k - 1)  # the last agent's cue is one of its own actions
        self.cue[rows] = cue

    def _obs(self) -> dict[str, torch.Tensor]:
        onehot = torch.nn.functional.one_hot(self.cue, self.k).float()
        if self.memory:
            onehot = onehot * (self.t == 0).view(-1, 1, 1)  # the cue is seen on the first step only
        obs = {STATE: onehot.flatten(1), AGENT_OBS: onehot}
        if not self.continuous:
            obs[ACTION_MASK] = self.mask.expand(self.num_envs, -1, -1).clone()
        if self.early:
            active = torch.ones(self.num_envs, self.num_agents, dtype=torch.bool, device=self.device)
            active[:, 0] = self.t < self.horizon // 2
            obs[AGENT_ACTIVE] = active
        return obs

    def reset(self, seed: int | None = None) -> dict[str, torch.Tensor]:
        if seed is not None:
            self.generator.manual_seed(seed)
        self.t.zero_()
        self._draw()
        return self._obs()

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Step counters, cues and the generator: a resumed run goes on exactly."""
        return {"t": self.t.clone(), "cue": self.cue.clone(), "generator": self.generator.get_state()}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        self.t.copy_(state["t"])
        self.cue.copy_(state["cue"])
        self.generator.set_state(state["generator"])

    def step(self, action: torch.Tensor) -> StepResult:
        action = self._step_action(action)
        if self.continuous:
            target = 2 * self.cue.float() / (self.k - 1) - 1
            reward = -(action.squeeze(-1).clamp(-1, 1) - target).abs()
        else:
            reward = (action == self.cue).float()
        if self.early:
            reward = reward * self._obs()[AGENT_ACTIVE]
        self.t += 1
        truncated = self.t >= self.horizon
        if not self.memory:  # a fresh cue every step; with memory, one per episode
            self._draw()
        final_obs = self._obs()
        self.t[truncated] = 0
        self._draw(truncated)  # a new episode starts on cues of its own
        return StepResult(self._obs(), reward, torch.zeros_like(truncated), truncated, final_obs, {})
