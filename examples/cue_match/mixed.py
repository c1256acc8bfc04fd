"""The cue game with agents of three kinds, for agent groups (``mappo.groups``): each kind observes
its own cue in its own width and answers with its own kind of action.

    rl-system train examples/cue_match/config_mixed.yaml    # a policy per kind, seconds
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from rl_system.envs.base import (
    AGENT_OBS,
    STATE,
    AgentBox,
    AgentDiscrete,
    AgentMixed,
    AgentMultiDiscrete,
    AgentSpace,
    StepResult,
    TensorSpec,
    VecEnv,
    make_generator,
)


class MixedCues(VecEnv):
    """``callers`` agents shown a cue of 3 (one-hot) name it (``Discrete(3)``, 1 when right);
    ``movers`` shown a point in ``[-0.8, 0.8]^2`` move to it (``Box(2)`` in ``[-1, 1]``, ``1 -`` the
    mean absolute miss); ``pickers`` shown two cues of 2 and 3 (one-hot, width 5) name both
    (``MultiDiscrete((2, 3))``, 0.5 for each). Agent order: callers, movers, pickers; observations
    padded to width 5; the state is every agent's unpadded observation side by side; rewards per
    agent; fresh cues every step; episodes of ``horizon`` steps (truncated). Random play earns
    about 0.33 / 0.4 / 0.42 a step per kind, a learned policy close to 1."""

    def __init__(self, num_envs: int, device: str | torch.device = "cpu", seed: int | None = None,
                 callers: int = 1, movers: int = 1, pickers: int = 1, horizon: int = 8):
        self.num_envs, self.device, self.horizon = num_envs, torch.device(device), horizon
        self.kinds = (callers, movers, pickers)
        self.num_agents = n = callers + movers + pickers
        own = ([("caller", 3, AgentDiscrete(3, 1))] * callers + [("mover", 2, AgentBox((2,), (-1.0,) * 2, (1.0,) * 2, 1))]
               * movers + [("picker", 5, AgentMultiDiscrete((2, 3), 1))] * pickers)
        count: dict[str, int] = {}
        agents = []
        for kind, width, action in own:
            agents.append(AgentSpace(f"{kind}_{count.setdefault(kind, 0)}", width, action))
            count[kind] += 1
        self.action_spec = AgentMixed(tuple(agents))
        self.observation_spec = {STATE: TensorSpec((3 * callers + 2 * movers + 5 * pickers,)),
                                 AGENT_OBS: TensorSpec((n, 5))}
        self.generator = make_generator(self.device, seed)
        self.t = torch.zeros(num_envs, dtype=torch.long, device=self.device)
        self.call = torch.zeros(num_envs, callers, dtype=torch.long, device=self.device)  # cue of 3
        self.point = torch.zeros(num_envs, movers, 2, device=self.device)                 # where to move
        self.pick = torch.zeros(num_envs, pickers, 2, dtype=torch.long, device=self.device)  # cues of 2 and 3

    def _draw(self, rows: torch.Tensor | slice = slice(None)) -> None:
        c, m, p = self.kinds
        g, k = self.generator, self.t[rows].shape[0]
        self.call[rows] = torch.randint(0, 3, (k, c), generator=g, device=self.device)
        self.point[rows] = torch.rand((k, m, 2), generator=g, device=self.device) * 1.6 - 0.8
        self.pick[rows] = torch.stack([torch.randint(0, 2, (k, p), generator=g, device=self.device),
                                       torch.randint(0, 3, (k, p), generator=g, device=self.device)], dim=-1)

    def _obs(self) -> dict[str, torch.Tensor]:
        call = F.one_hot(self.call, 3).float()                                              # [N, c, 3]
        pick = torch.cat([F.one_hot(self.pick[..., 0], 2), F.one_hot(self.pick[..., 1], 3)], -1).float()  # [N, p, 5]
        rows = [F.pad(call, (0, 2)), F.pad(self.point, (0, 3)), pick]
        state = torch.cat([call.flatten(1), self.point.flatten(1), pick.flatten(1)], dim=1)
        return {STATE: state, AGENT_OBS: torch.cat(rows, dim=1)}

    def reset(self, seed: int | None = None) -> dict[str, torch.Tensor]:
        if seed is not None:
            self.generator.manual_seed(seed)
        self.t.zero_()
        self._draw()
        return self._obs()

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Step counters, cues and the generator: a resumed run goes on exactly."""
        return {"t": self.t.clone(), "call": self.call.clone(), "point": self.point.clone(), "pick": self.pick.clone(),
                "generator": self.generator.get_state()}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        for key in ("t", "call", "point", "pick"):
            getattr(self, key).copy_(state[key])
        self.generator.set_state(state["generator"])

    def step(self, action: torch.Tensor) -> StepResult:
        action = self._step_action(action)                                                   # [N, n, 2]
        c, m, _ = self.kinds
        said = action[:, :c, 0].long()
        moved = action[:, c:c + m].clamp(-1, 1)
        picked = action[:, c + m:].long()
        reward = torch.cat([(said == self.call).float(), 1 - (moved - self.point).abs().mean(-1),
                            0.5 * (picked == self.pick).float().sum(-1)], dim=1)
        self.t += 1
        truncated = self.t >= self.horizon
        self._draw()
        final_obs = self._obs()
        self.t[truncated] = 0
        self._draw(truncated)
        return StepResult(self._obs(), reward, torch.zeros_like(truncated), truncated, final_obs, {})
