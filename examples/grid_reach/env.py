"""GridReach: N agents on a size x size grid, each walking to its own goal. Batched in torch."""

import torch

from rl_system.envs.base import MultiDiscrete, StepResult, TensorSpec, VecEnv, make_generator


class GridReach(VecEnv):
    """Action (dx, dy), each in {0: -1, 1: stay, 2: +1}; moves off the grid are masked out."""

    def __init__(self, num_envs, device="cpu", seed=None, size=8, max_steps=40):
        self.num_envs, self.device, self.size, self.max_steps = num_envs, torch.device(device), size, max_steps
        self.observation_spec = {
            "pos": TensorSpec((2,), torch.float32, 0.0, 1.0),
            "goal": TensorSpec((2,), torch.float32, 0.0, 1.0),
            "action_mask": TensorSpec((6,), torch.bool),  # 3 flags for dx, then 3 for dy
        }
        self.action_spec = MultiDiscrete((3, 3))
        self.gen = make_generator(self.device, seed)
        self.pos = torch.zeros(num_envs, 2, dtype=torch.long, device=self.device)
        self.goal = torch.zeros_like(self.pos)
        self.t = torch.zeros(num_envs, dtype=torch.long, device=self.device)

    def _new_episodes(self, idx):
        cells = torch.randint(0, self.size, (len(idx), 4), generator=self.gen, device=self.device)
        self.pos[idx], self.goal[idx], self.t[idx] = cells[:, :2], cells[:, 2:], 0

    def _observe(self):
        mask = torch.stack([self.pos > 0, torch.ones_like(self.pos, dtype=torch.bool),
                            self.pos < self.size - 1], dim=2)  # [N, 2 axes, 3 moves]
        scale = self.size - 1
        return {"pos": self.pos / scale, "goal": self.goal / scale, "action_mask": mask.reshape(-1, 6)}

    def reset(self, seed=None):
        if seed is not None:
            self.gen.manual_seed(seed)
        self._new_episodes(torch.arange(self.num_envs, device=self.device))
        return self._observe()

    def step(self, action):
        action = self._step_action(action)  # checks shape and dtype
        before = (self.pos - self.goal).abs().sum(1)
        self.pos = (self.pos + action - 1).clamp(0, self.size - 1)
        self.t += 1
        distance = (self.pos - self.goal).abs().sum(1)
        success = distance == 0
        reward = (before - distance).float() * 0.1 + success.float()
        truncated = (self.t >= self.max_steps) & ~success
        final_obs = self._observe()
        done = success | truncated
        if done.any():
            self._new_episodes(done.nonzero().squeeze(1))
        return StepResult(self._observe(), reward, success, truncated, final_obs, {"success": success})

    def state_dict(self):
        return {"pos": self.pos.clone(), "goal": self.goal.clone(), "t": self.t.clone(),
                "gen": self.gen.get_state()}

    def load_state_dict(self, state):
        self.pos, self.goal, self.t = state["pos"].clone(), state["goal"].clone(), state["t"].clone()
        self.gen.set_state(state["gen"])
