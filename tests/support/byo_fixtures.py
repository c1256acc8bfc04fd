"""Deliberately broken envs and networks for tests/envs/test_byo.py (imported as ``byo_fixtures``)."""

import gymnasium
import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from examples.grid_reach.env import GridReach
from rl_system.envs.base import Discrete, MultiDiscrete, StepResult, TensorSpec, VecEnv


class WideMask(GridReach):
    """A MultiDiscrete((3, 3)) env whose mask has 9 flags instead of 3 + 3."""

    def __init__(self, num_envs, device="cpu", seed=None, **kwargs):
        super().__init__(num_envs, device, seed, **kwargs)
        self.observation_spec = {**self.observation_spec, "action_mask": TensorSpec((9,), torch.bool)}


def not_an_env(num_envs, device="cpu", seed=None, **kwargs):
    """A factory that returns the wrong type."""
    return {"num_envs": num_envs}


class NoAutoReset(GridReach):
    """Ends episodes but keeps stepping from the final state: obs == final_obs on every end."""

    def step(self, action):
        result = super().step(action)
        return result._replace(obs=result.final_obs)


class Nondeterministic(GridReach):
    """Ignores the seed: two copies with one seed diverge."""

    def reset(self, seed=None):
        self.gen.seed()
        return super().reset(seed=None)


class WrongDtype(GridReach):
    """Rewards in float64, against the API's float32."""

    def step(self, action):
        result = super().step(action)
        return result._replace(reward=result.reward.double())


class NoLegalAction(GridReach):
    """A mask that sometimes leaves the dy sub-action no legal choice."""

    def _observe(self):
        obs = super()._observe()
        obs["action_mask"][::3, 3:] = False
        return obs


class NotANetwork:
    """A class that is not an nn.Module."""

    def __init__(self, obs_spec, action_spec, model_cfg):
        pass


class NoEvaluate(nn.Module):
    """An nn.Module without evaluate()."""

    def __init__(self, obs_spec, action_spec, model_cfg):
        super().__init__()

    def act(self, obs, deterministic=False):
        raise NotImplementedError

    def value(self, obs):
        raise NotImplementedError


class RecurrentNoSequence(NoEvaluate):
    """A recurrent network (it has initial_state) without evaluate_sequence()."""

    state_size = 4

    def initial_state(self, batch):
        raise NotImplementedError


class MaskCollision(gymnasium.Env):
    """A Gymnasium env whose Dict observation uses the key 'action_mask' for something else."""

    observation_space = spaces.Dict({"pos": spaces.Box(-1, 1, (2,)), "action_mask": spaces.Box(-5, 5, (3,))})
    action_space = spaces.Discrete(3)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        return self.observation_space.sample(), {}

    def step(self, action):
        return self.observation_space.sample(), 0.0, False, False, {}


class DictMultiDiscrete(gymnasium.Env):
    """Dict observations with a mask, MultiDiscrete actions, a boolean 'is_success' at the end."""

    observation_space = spaces.Dict({"pos": spaces.Box(0, 1, (2,)), "action_mask": spaces.MultiBinary(5)})
    action_space = spaces.MultiDiscrete([2, 3])

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def _obs(self):
        mask = np.ones(5, np.int8)
        mask[1] = 0  # sub-action 0 may only be 0
        return {"pos": np.full(2, self.t / 4, np.float32), "action_mask": mask}

    def step(self, action):
        self.t += 1
        done = self.t >= 4
        info = {"is_success": bool(action[1] == 2)} if done else {}
        return self._obs(), float(action[1] == 2), done, False, info


gymnasium.register("ByoMaskCollision-v0", entry_point=MaskCollision)
gymnasium.register("ByoDictMultiDiscrete-v0", entry_point=DictMultiDiscrete, max_episode_steps=10)
