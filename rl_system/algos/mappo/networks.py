"""Multi-agent PPO's actor-critic: every agent acts from its own observation; its value comes from
the global state (MAPPO) or from its own observation (IPPO).

Shapes: ``B`` env steps, ``n`` agents, ``O`` an agent's observation width, ``S`` the state's.
The layers are :class:`AgentLinear`: one weight for all agents (``share_params``: the agent's
index rides along one-hot, so a shared network can still act differently per agent) or one per
agent, applied to all agents in one batched product either way.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from rl_system.algos.mappo.config import MAPPOConfig
from rl_system.envs.base import (
    ACTION_MASK,
    AGENT_OBS,
    STATE,
    AgentActionSpec,
    AgentBox,
    AgentDiscrete,
    AgentMultiDiscrete,
    TensorSpec,
)

_ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU}


class AgentLinear(nn.Module):
    """``[B, n, in] -> [B, n, out]`` with ``groups`` weights: 1 (shared by the agents) or ``n``
    (agent ``i`` has its own); orthogonal init with gain ``std``, zero bias."""

    def __init__(self, n_in: int, n_out: int, groups: int, std: float):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(groups, n_in, n_out))
        self.bias = nn.Parameter(torch.zeros(groups, n_out))
        for g in range(groups):
            nn.init.orthogonal_(self.weight.data[g].T, std)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.weight.shape[0] == 1:
            return torch.matmul(x, self.weight[0]) + self.bias[0]
        return torch.einsum("bni,nio->bno", x, self.weight) + self.bias


def agent_mlp(n_in: int, hidden: list[int], n_out: int, groups: int, activation: str, out_std: float) -> nn.Sequential:
    layers: list[nn.Module] = []
    for h in hidden:
        layers += [AgentLinear(n_in, h, groups, math.sqrt(2)), _ACTIVATIONS[activation]()]
        n_in = h
    layers.append(AgentLinear(n_in, n_out, groups, out_std))
    return nn.Sequential(*layers)


def action_width(spec: AgentActionSpec) -> int:
    """The actor's outputs per agent: logits (discrete), or the Gaussian's means (continuous)."""
    if isinstance(spec, AgentDiscrete):
        return spec.n
    if isinstance(spec, AgentMultiDiscrete):
        return sum(spec.nvec)
    return math.prod(spec.agent_shape)


class MultiAgentActorCritic(nn.Module):
    """Actor ``[B, n, O (+ n)] -> [B, n, A]`` and critic ``[B, n, S or O (+ n)] -> [B, n]``.

    ``act``/``evaluate``/``value`` take the env's observation dict (:data:`STATE` ``[B, S]``,
    :data:`AGENT_OBS` ``[B, n, O]``, optional :data:`ACTION_MASK` ``[B, n, width]``) and give
    per-agent tensors ``[B, n]``; actions are ``[B, n]`` (discrete), ``[B, n, K]``
    (multi-discrete) or ``[B, n, d]`` (continuous; sampled unclipped, the env clips)."""

    def __init__(self, obs_spec: dict[str, TensorSpec], action_spec: AgentActionSpec, cfg: MAPPOConfig):
        super().__init__()
        n = action_spec.num_agents
        self.spec, self.num_agents, self.central = action_spec, n, cfg.critic == "central"
        groups = 1 if cfg.share_params else n
        ids = n if cfg.share_params else 0  # a network per agent knows whose it is
        obs_dim, state_dim = obs_spec[AGENT_OBS].shape[1], obs_spec[STATE].shape[0]
        self.register_buffer("agent_ids", torch.eye(n)[:, :ids].clone(), persistent=False)
        self.actor = agent_mlp(obs_dim + ids, cfg.hidden_sizes, action_width(action_spec), groups, cfg.activation,
                               0.01)
        critic_in = (state_dim if self.central else obs_dim) + ids
        self.critic = agent_mlp(critic_in, cfg.hidden_sizes, 1, groups, cfg.activation, 1.0)
        if isinstance(action_spec, AgentBox):
            self.log_std = nn.Parameter(torch.full((groups, action_width(action_spec)), cfg.init_log_std))

    # -- inputs --------------------------------------------------------------------------------
    def _with_ids(self, x: torch.Tensor) -> torch.Tensor:
        """``[B, n, F] -> [B, n, F + ids]``."""
        if not self.agent_ids.shape[1]:
            return x
        return torch.cat([x, self.agent_ids.expand(x.shape[0], -1, -1)], dim=-1)

    def _critic_in(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        if self.central:
            state = obs[STATE]
            return self._with_ids(state.unsqueeze(1).expand(-1, self.num_agents, -1))
        return self._with_ids(obs[AGENT_OBS])

    def value(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        """``[B, n]``: each agent's value."""
        return self.critic(self._critic_in(obs)).squeeze(-1)

    # -- the policy ----------------------------------------------------------------------------
    def _std(self) -> torch.Tensor:
        return self.log_std.exp()  # [groups, d]: broadcasts over the agents

    def act(self, obs: dict[str, torch.Tensor], deterministic: bool = False
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(action, logp [B, n], value [B, n])``, no grad."""
        out = self.actor(self._with_ids(obs[AGENT_OBS]))
        std = self._std() if isinstance(self.spec, AgentBox) else None
        action, logp = choose(self.spec, out, obs.get(ACTION_MASK), std, deterministic)
        return action, logp, self.value(obs)

    def evaluate(self, obs: dict[str, torch.Tensor], action: torch.Tensor
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(logp, entropy, value)`` ``[B, n]`` each of ``action``, differentiable."""
        out = self.actor(self._with_ids(obs[AGENT_OBS]))
        if isinstance(self.spec, AgentBox):
            std = self._std()
            logp = _gaussian_logp(action, out, std)
            entropy = (0.5 + 0.5 * math.log(2 * math.pi) + std.log()).sum(-1).expand_as(logp)
        else:
            parts = _log_probs(self.spec, out, obs.get(ACTION_MASK)).split(_widths(self.spec), dim=-1)
            taken = action.unsqueeze(-1) if isinstance(self.spec, AgentDiscrete) else action
            logp = sum(p.gather(-1, taken[..., k:k + 1]).squeeze(-1) for k, p in enumerate(parts))
            entropy = sum(-(p.exp() * p).sum(-1) for p in parts)
        return logp, entropy, self.value(obs)


def choose(spec: AgentActionSpec, out: torch.Tensor, mask: torch.Tensor | None, std: torch.Tensor | None,
           deterministic: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """``(action, logp)`` from the actor's outputs ``out [B, n, A]`` (``mask [B, n, width]``
    where the env masks actions; ``std``, broadcasting over ``out``, for continuous ones)."""
    if isinstance(spec, AgentBox):
        action = out if deterministic else out + std * torch.randn_like(out)
        return action, _gaussian_logp(action, out, std)
    parts = _log_probs(spec, out, mask).split(_widths(spec), dim=-1)
    choice = [p.argmax(-1) if deterministic else _sample(p) for p in parts]
    logp = sum(p.gather(-1, c.unsqueeze(-1)).squeeze(-1) for p, c in zip(parts, choice))
    return (choice[0] if isinstance(spec, AgentDiscrete) else torch.stack(choice, dim=-1)), logp


def _log_probs(spec: AgentActionSpec, out: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Masked log-probabilities ``[B, n, width]``: a masked action's logit is the most negative
    float, so its probability is 0."""
    if mask is not None:
        out = out.masked_fill(~mask, torch.finfo(out.dtype).min)
    if isinstance(spec, AgentDiscrete):
        return F.log_softmax(out, dim=-1)
    return torch.cat([F.log_softmax(part, dim=-1) for part in out.split(spec.nvec, dim=-1)], dim=-1)


def _widths(spec: AgentActionSpec) -> list[int]:
    return [spec.n] if isinstance(spec, AgentDiscrete) else list(spec.nvec)


def _sample(logp: torch.Tensor) -> torch.Tensor:
    """One draw per row of ``[..., A]`` log-probabilities -> ``[...]`` int64."""
    flat = logp.reshape(-1, logp.shape[-1]).exp()
    return torch.multinomial(flat, 1).reshape(logp.shape[:-1])


def _gaussian_logp(action: torch.Tensor, mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    """``[B, n, d] -> [B, n]``: the log-density of a diagonal Gaussian, summed over the dims."""
    z = (action - mean) / std
    return (-0.5 * z.square() - std.log() - 0.5 * math.log(2 * math.pi)).sum(-1)
