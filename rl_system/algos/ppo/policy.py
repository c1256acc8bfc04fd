"""Actor-critic networks: separate actor and critic MLPs over flattened dict observations.

Shapes: ``obs`` is ``dict[str, Tensor[B, *spec.shape]]``; every method returns ``[B]`` tensors
except the action (``[B]`` int64 for :class:`~envs.base.Discrete`, ``[B, A]`` float32 for
:class:`~envs.base.Box`). An ``"action_mask"`` observation entry (bool ``[B, n]``) is not fed to
the networks; it masks the logits so illegal actions get probability zero.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from envs.base import Box, Discrete, TensorSpec
from rl_system.config import ModelConfig

ACTION_MASK = "action_mask"
_ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU, "elu": nn.ELU}
_LOG_2PI = math.log(2 * math.pi)


def _layer(n_in: int, n_out: int, std: float) -> nn.Linear:
    # Orthogonal init with a small gain on the output heads (CleanRL / "37 details" defaults).
    layer = nn.Linear(n_in, n_out)
    nn.init.orthogonal_(layer.weight, std)
    nn.init.zeros_(layer.bias)
    return layer


def mlp(n_in: int, hidden: list[int], n_out: int, activation: str, out_std: float) -> nn.Sequential:
    layers: list[nn.Module] = []
    for h in hidden:
        layers += [_layer(n_in, h, math.sqrt(2)), _ACTIVATIONS[activation]()]
        n_in = h
    layers.append(_layer(n_in, n_out, out_std))
    return nn.Sequential(*layers)


class RunningNorm(nn.Module):
    """Running mean/variance of a feature vector (parallel Welford), kept as buffers so that it
    travels with the weights: every worker normalises with the statistics of its policy version."""

    def __init__(self, dim: int, clip: float = 10.0):
        super().__init__()
        self.clip = clip
        self.register_buffer("mean", torch.zeros(dim, dtype=torch.float64))
        self.register_buffer("var", torch.ones(dim, dtype=torch.float64))
        self.register_buffer("count", torch.tensor(1e-4, dtype=torch.float64))

    @torch.no_grad()
    def update(self, x: torch.Tensor) -> None:
        """Fold a batch ``x[B, dim]`` into the statistics."""
        x = x.to(torch.float64)
        b_mean, b_var, b = x.mean(0), x.var(0, unbiased=False), x.shape[0]
        delta, total = b_mean - self.mean, self.count + b
        m2 = self.var * self.count + b_var * b + delta.square() * self.count * b / total
        self.mean += delta * b / total
        self.var.copy_(m2 / total)
        self.count.copy_(total)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        std = (self.var + 1e-8).sqrt().to(x.dtype)
        return ((x - self.mean.to(x.dtype)) / std).clamp(-self.clip, self.clip)


def flat_obs_dim(obs_spec: dict[str, TensorSpec]) -> int:
    return sum(math.prod(s.shape) for k, s in obs_spec.items() if k != ACTION_MASK)


class ActorCritic(nn.Module):
    def __init__(self, obs_spec: dict[str, TensorSpec], action_spec: Discrete | Box, cfg: ModelConfig):
        super().__init__()
        self.obs_keys = sorted(k for k in obs_spec if k != ACTION_MASK)
        self.discrete = isinstance(action_spec, Discrete)
        n_in = flat_obs_dim(obs_spec)
        n_out = action_spec.n if self.discrete else math.prod(action_spec.shape)
        self.obs_norm = RunningNorm(n_in) if cfg.normalize_obs else None
        self.actor = mlp(n_in, cfg.hidden_sizes, n_out, cfg.activation, out_std=0.01)
        self.critic = mlp(n_in, cfg.hidden_sizes, 1, cfg.activation, out_std=1.0)
        if not self.discrete:
            self.log_std = nn.Parameter(torch.full((n_out,), cfg.init_log_std))
            self.action_shape = tuple(action_spec.shape)

    # -- features -------------------------------------------------------------------------
    def flatten(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        """dict of ``[B, ...]`` -> ``[B, D]`` float32 (keys in sorted order), raw (unnormalised)."""
        parts = [obs[k].reshape(obs[k].shape[0], -1) for k in self.obs_keys]
        x = parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)
        return x.float()

    def features(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        x = self.flatten(obs)
        return self.obs_norm(x) if self.obs_norm is not None else x

    def _logits(self, x: torch.Tensor, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        logits = self.actor(x)
        mask = obs.get(ACTION_MASK)
        if mask is not None:
            logits = logits.masked_fill(~mask, torch.finfo(logits.dtype).min)
        return logits

    # -- acting and evaluation ---------------------------------------------------------------
    def value(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.critic(self.features(obs)).squeeze(-1)

    @torch.no_grad()
    def act(self, obs: dict[str, torch.Tensor], deterministic: bool = False):
        """Sample actions; returns ``(action, logp[B], value[B])``."""
        x = self.features(obs)
        value = self.critic(x).squeeze(-1)
        if self.discrete:
            logp_all = torch.log_softmax(self._logits(x, obs), dim=-1)
            if deterministic:
                action = logp_all.argmax(-1)
            else:
                # Gumbel-max: argmax(log p + Gumbel noise), Gumbel = -log(Exp(1)). Same
                # distribution as multinomial, ~4x cheaper per step for small batches.
                action = (logp_all - torch.empty_like(logp_all).exponential_().log()).argmax(-1)
            logp = logp_all.gather(-1, action.unsqueeze(-1)).squeeze(-1)
        else:
            mean = self.actor(x)
            std = self.log_std.exp()
            action = mean if deterministic else mean + std * torch.randn_like(mean)
            logp = self._gauss_logp(action, mean)
            action = action.reshape(action.shape[0], *self.action_shape)
        return action, logp, value

    def _gauss_logp(self, action: torch.Tensor, mean: torch.Tensor) -> torch.Tensor:
        z = (action - mean) * torch.exp(-self.log_std)
        return (-0.5 * z.square() - self.log_std - 0.5 * _LOG_2PI).sum(-1)

    def evaluate(self, obs: dict[str, torch.Tensor], action: torch.Tensor):
        """Log-prob and entropy of ``action`` under the current policy, and the value:
        ``(logp[B], entropy[B], value[B])``, differentiable."""
        x = self.features(obs)
        value = self.critic(x).squeeze(-1)
        if self.discrete:
            logp_all = torch.log_softmax(self._logits(x, obs), dim=-1)
            logp = logp_all.gather(-1, action.long().unsqueeze(-1)).squeeze(-1)
            p = logp_all.exp()
            # where p == 0 (masked actions) p*logp is 0*-inf: use p*logp with logp clamped.
            entropy = -(p * logp_all.clamp_min(-1e30)).sum(-1)
        else:
            mean = self.actor(x)
            logp = self._gauss_logp(action.reshape(mean.shape), mean)
            entropy = (0.5 + 0.5 * _LOG_2PI + self.log_std).sum().expand(mean.shape[0])
        return logp, entropy, value
