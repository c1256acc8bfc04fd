"""A network of one's own for PPO (model.network): one shared trunk, a policy head and a value
head, for Discrete or MultiDiscrete actions with action masks. Implements
rl_system.algos.protocols.ActorCriticNetwork."""

import torch
from torch import nn

from rl_system.envs.base import ACTION_MASK, Discrete


class SharedTrunk(nn.Module):
    def __init__(self, obs_spec, action_spec, model_cfg):
        super().__init__()
        self.keys = sorted(k for k in obs_spec if k != ACTION_MASK)
        n_in = sum(obs_spec[k].shape[0] if obs_spec[k].shape else 1 for k in self.keys)
        self.nvec = [action_spec.n] if isinstance(action_spec, Discrete) else list(action_spec.nvec)
        self.single = isinstance(action_spec, Discrete)
        width = model_cfg.kwargs.get("width", 128)
        self.trunk = nn.Sequential(nn.Linear(n_in, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU())
        self.pi = nn.Linear(width, sum(self.nvec))
        self.v = nn.Linear(width, 1)

    def _heads(self, obs):
        h = self.trunk(torch.cat([obs[k].reshape(len(obs[k]), -1).float() for k in self.keys], dim=1))
        logits = self.pi(h)
        if ACTION_MASK in obs:
            logits = logits.masked_fill(~obs[ACTION_MASK], -1e9)
        dists = [torch.distributions.Categorical(logits=part) for part in logits.split(self.nvec, dim=1)]
        return dists, self.v(h).squeeze(1)

    def value(self, obs):
        return self._heads(obs)[1]

    @torch.no_grad()
    def act(self, obs, deterministic=False):
        dists, value = self._heads(obs)
        action = torch.stack([d.probs.argmax(1) if deterministic else d.sample() for d in dists], dim=1)
        logp = sum(d.log_prob(a) for d, a in zip(dists, action.unbind(1)))
        return (action.squeeze(1) if self.single else action), logp, value

    def evaluate(self, obs, action):
        dists, value = self._heads(obs)
        action = action.reshape(len(value), -1)
        logp = sum(d.log_prob(a) for d, a in zip(dists, action.unbind(1)))
        return logp, sum(d.entropy() for d in dists), value
