"""The built-in actor-critic: separate actor and critic MLPs over flattened dict observations.
It implements :class:`~rl_system.algos.protocols.ActorCriticNetwork`, the contract a user's own
network (``model.network``) implements too.

Shapes: ``obs`` is ``dict[str, Tensor[B, *spec.shape]]``; every method returns ``[B]`` tensors
except the action: ``[B]`` int64 for :class:`~envs.base.Discrete`, ``[B, K]`` int64 for
:class:`~envs.base.MultiDiscrete` (independent categoricals, log-probs and entropies summed),
``[B, *shape]`` float32 for :class:`~envs.base.Box` (diagonal Gaussian, state-independent
``log_std``). An ``"action_mask"`` entry (bool ``[B, n]`` or ``[B, sum(nvec)]``) is not fed to the
networks; it masks the logits so illegal actions get probability zero.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from envs.base import ACTION_MASK, Box, Discrete, MultiDiscrete, TensorSpec
from rl_system.config import ModelConfig

_ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU, "elu": nn.ELU}
_LOG_2PI = math.log(2 * math.pi)


def _layer(n_in: int, n_out: int, std: float, ortho: bool) -> nn.Linear:
    # Orthogonal init with a small gain on the output heads (CleanRL / "37 details" defaults);
    # ortho=False keeps torch's default init (what SB3's ortho_init=False configs rely on).
    layer = nn.Linear(n_in, n_out)
    if ortho:
        nn.init.orthogonal_(layer.weight, std)
        nn.init.zeros_(layer.bias)
    return layer


def mlp(n_in: int, hidden: list[int], n_out: int, activation: str, out_std: float, ortho: bool = True) -> nn.Sequential:
    layers: list[nn.Module] = []
    for h in hidden:
        layers += [_layer(n_in, h, math.sqrt(2), ortho), _ACTIVATIONS[activation]()]
        n_in = h
    layers.append(_layer(n_in, n_out, out_std, ortho))
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
    """Actor and critic MLPs (``model.hidden_sizes``, ``model.activation``) on the flattened,
    optionally normalised (``model.normalize_obs``) observation."""

    def __init__(self, obs_spec: dict[str, TensorSpec], action_spec: Discrete | MultiDiscrete | Box,
                 cfg: ModelConfig):
        super().__init__()
        if not isinstance(action_spec, (Discrete, MultiDiscrete, Box)):
            raise ValueError(f"the PPO actor-critic takes Discrete, MultiDiscrete or Box actions, "
                             f"got {type(action_spec).__name__}")
        self.obs_keys = sorted(k for k in obs_spec if k != ACTION_MASK)
        self.discrete = isinstance(action_spec, Discrete)
        self.multi = isinstance(action_spec, MultiDiscrete)
        n_in = flat_obs_dim(obs_spec)
        if isinstance(action_spec, Box):
            n_out = math.prod(action_spec.shape)
        else:
            n_out = action_spec.n if self.discrete else sum(action_spec.nvec)
        self.obs_norm = RunningNorm(n_in) if cfg.normalize_obs else None
        self.actor = mlp(n_in, cfg.hidden_sizes, n_out, cfg.activation, out_std=0.01, ortho=cfg.ortho_init)
        self.critic = mlp(n_in, cfg.hidden_sizes, 1, cfg.activation, out_std=1.0, ortho=cfg.ortho_init)
        if self.multi:
            # Sub-action k's logits go to row k of a [K, M] grid (M = max nvec); the padding
            # stays at the most negative float, so it never wins an argmax and has probability 0.
            nvec = action_spec.nvec
            self.grid = (len(nvec), max(nvec))
            slots = torch.cat([k * self.grid[1] + torch.arange(n) for k, n in enumerate(nvec)])
            self.register_buffer("slots", slots, persistent=False)
        if isinstance(action_spec, Box):
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

    def observe(self, obs: dict[str, torch.Tensor]) -> None:
        """Fold a batch of observations ``[B, ...]`` into the running normaliser (the learner
        calls it after each update)."""
        if self.obs_norm is not None:
            self.obs_norm.update(self.flatten(obs))

    def _log_probs(self, x: torch.Tensor, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        """Masked log-probabilities: ``[B, n]`` (Discrete) or ``[B, K, M]`` (MultiDiscrete)."""
        logits = self.actor(x)
        low = torch.finfo(logits.dtype).min
        mask = obs.get(ACTION_MASK)
        if mask is not None:
            logits = logits.masked_fill(~mask, low)
        if self.multi:
            K, M = self.grid
            logits = logits.new_full((logits.shape[0], K * M), low).index_copy_(1, self.slots, logits).view(-1, K, M)
        return torch.log_softmax(logits, dim=-1)

    # -- acting and evaluation ---------------------------------------------------------------
    def value(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.critic(self.features(obs)).squeeze(-1)

    @torch.no_grad()
    def act(self, obs: dict[str, torch.Tensor], deterministic: bool = False):
        """Sample actions; returns ``(action, logp[B], value[B])``."""
        x = self.features(obs)
        value = self.critic(x).squeeze(-1)
        if self.discrete or self.multi:
            logp_all = self._log_probs(x, obs)
            if deterministic:
                action = logp_all.argmax(-1)
            else:
                # Gumbel-max: argmax(log p + Gumbel noise), Gumbel = -log(Exp(1)). Same
                # distribution as multinomial, ~4x cheaper per step for small batches.
                action = (logp_all - torch.empty_like(logp_all).exponential_().log()).argmax(-1)
            logp = logp_all.gather(-1, action.unsqueeze(-1)).squeeze(-1)
            if self.multi:
                logp = logp.sum(-1)
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
        if self.discrete or self.multi:
            logp_all = self._log_probs(x, obs)
            logp = logp_all.gather(-1, action.long().unsqueeze(-1)).squeeze(-1)
            # Masked actions and padding have p == 0 and a finite log p, so p * log p is 0.
            entropy = -(logp_all.exp() * logp_all).sum(-1)
            if self.multi:
                logp, entropy = logp.sum(-1), entropy.sum(-1)
        else:
            mean = self.actor(x)
            logp = self._gauss_logp(action.reshape(mean.shape), mean)
            entropy = (0.5 + 0.5 * _LOG_2PI + self.log_std).sum().expand(mean.shape[0])
        return logp, entropy, value
