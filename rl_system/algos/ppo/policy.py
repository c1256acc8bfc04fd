"""The built-in actor-critics. :class:`ActorCritic`: per-key encoders (:mod:`.encoders`: flat
keys concatenated and optionally normalised, images and scans through CNNs), then separate actor
and critic MLP heads; it implements :class:`~rl_system.algos.protocols.ActorCriticNetwork`, the
contract a user's own network (``model.network``) implements too.
:class:`RecurrentActorCritic` puts a GRU/LSTM core (:mod:`rl_system.algos.recurrent`) between the
encoders and the heads and implements
:class:`~rl_system.algos.protocols.RecurrentActorCriticNetwork`.

Shapes: ``obs`` is ``dict[str, Tensor[B, *spec.shape]]``; every method returns ``[B]`` tensors
except the action: ``[B]`` int64 for :class:`~rl_system.envs.base.Discrete`, ``[B, K]`` int64 for
:class:`~rl_system.envs.base.MultiDiscrete` (independent categoricals, log-probs and entropies summed),
``[B, *shape]`` float32 for :class:`~rl_system.envs.base.Box` (diagonal Gaussian, state-independent
``log_std``). An ``"action_mask"`` entry (bool ``[B, n]`` or ``[B, sum(nvec)]``) is not fed to the
networks; it masks the logits so illegal actions get probability zero.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from rl_system import collective
from rl_system.algos import layouts
from rl_system.algos.activations import Tanh
from rl_system.algos.ppo.config import ModelConfig
from rl_system.algos.ppo.encoders import ObsEncoders, onehot_width, plan
from rl_system.algos.precision import Float32Head
from rl_system.algos.recurrent import RecurrentCore
from rl_system.envs.base import ACTION_MASK, Box, Discrete, MultiDiscrete, TensorSpec

_ACTIVATIONS = {"tanh": Tanh, "relu": nn.ReLU, "elu": nn.ELU}
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
    def update(self, x: torch.Tensor, group: collective.Collective = collective.SOLO) -> None:
        """Fold a batch ``x[B, dim]`` into the statistics; in a learner ``group`` the batch is every
        learner's rows together (:mod:`rl_system.collective`), so all hold the same statistics."""
        b, b_mean, b_var = group.moments(x)
        delta, total = b_mean - self.mean, self.count + b
        m2 = self.var * self.count + b_var * b + delta.square() * self.count * b / total
        self.mean += delta * b / total
        self.var.copy_(m2 / total)
        self.count.copy_(total)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        std = (self.var + 1e-8).sqrt().to(x.dtype)
        return ((x - self.mean.to(x.dtype)) / std).clamp(-self.clip, self.clip)


class ActorCritic(nn.Module):
    """Encoders (``model.encoders``), then actor and critic MLPs (``model.hidden_sizes``,
    ``model.activation``). Flat keys are concatenated in sorted order and normalised with
    ``model.normalize_obs``; conv-encoded keys (images, scans) are not normalised."""

    def __init__(self, obs_spec: dict[str, TensorSpec], action_spec: Discrete | MultiDiscrete | Box,
                 cfg: ModelConfig):
        super().__init__()
        if not isinstance(action_spec, (Discrete, MultiDiscrete, Box)):
            raise ValueError(f"the PPO actor-critic takes Discrete, MultiDiscrete or Box actions, "
                             f"got {type(action_spec).__name__}")
        chosen = plan(obs_spec, cfg.encoders)
        self.obs_keys = [k for k, e in chosen.items() if e.type in ("flat", "onehot")]  # sorted
        # One-hot keys: (low, width); their entries widen by ``width`` when flattened.
        self.onehot = {k: (int(obs_spec[k].low), onehot_width(obs_spec[k])) for k, e in chosen.items()
                       if e.type == "onehot"}
        self.discrete = isinstance(action_spec, Discrete)
        self.multi = isinstance(action_spec, MultiDiscrete)
        flat_dim = sum(math.prod(obs_spec[k].shape) * self.onehot.get(k, (0, 1))[1] for k in self.obs_keys)
        if isinstance(action_spec, Box):
            n_out = math.prod(action_spec.shape)
        else:
            n_out = action_spec.n if self.discrete else sum(action_spec.nvec)
        self.obs_norm = RunningNorm(flat_dim) if cfg.normalize_obs and flat_dim else None
        self.encoders = ObsEncoders(obs_spec, chosen)
        separate = not cfg.share_encoder and len(self.encoders.nets) > 0
        self.critic_encoders = ObsEncoders(obs_spec, chosen) if separate else None
        self.feature_dim = flat_dim + self.encoders.out_dim
        n_in = self.head_input_dim(cfg)
        self.actor = Float32Head(*mlp(n_in, cfg.hidden_sizes, n_out, cfg.activation, out_std=0.01, ortho=cfg.ortho_init))
        self.critic = Float32Head(*mlp(n_in, cfg.hidden_sizes, 1, cfg.activation, out_std=1.0, ortho=cfg.ortho_init))
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

    def head_input_dim(self, cfg: ModelConfig) -> int:
        """Width of the heads' input: the encoders' features here."""
        return self.feature_dim

    # -- features -------------------------------------------------------------------------
    def flatten(self, obs: dict[str, torch.Tensor]) -> torch.Tensor | None:
        """The flat keys of ``obs`` as ``[B, D]`` float32 (sorted keys), raw (unnormalised);
        None when every key is conv-encoded."""
        if not self.obs_keys:
            return None
        parts = []
        for k in self.obs_keys:
            x = obs[k].reshape(obs[k].shape[0], -1)
            if k in self.onehot:
                low, width = self.onehot[k]
                x = F.one_hot((x.long() - low).clamp(0, width - 1), width).flatten(1)
            parts.append(x.float())
        return _cat(parts)

    def encode(self, obs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """Actor and critic features ``[B, feature_dim]`` each (the same tensor when the
        encoders are shared)."""
        x = self.flatten(obs)
        flat = [] if x is None else [self.obs_norm(x) if self.obs_norm is not None else x]
        if flat and not self.encoders.nets:  # flat keys only: no call of the empty module
            return flat[0], flat[0]
        xa = _cat(flat + self.encoders(obs))
        xc = xa if self.critic_encoders is None else _cat(flat + self.critic_encoders(obs))
        return xa, xc

    def observe(self, obs: dict[str, torch.Tensor], group: collective.Collective = collective.SOLO) -> None:
        """Fold a batch of observations ``[B, ...]`` into the running normaliser (the learner
        calls it after each update; ``group``: the learner group the statistics are global over)."""
        if self.obs_norm is not None:
            self.obs_norm.update(self.flatten(obs), group)

    def _log_probs(self, x: torch.Tensor, obs: dict[str, torch.Tensor], sampling: bool = False) -> torch.Tensor:
        """Masked log-probabilities: ``[B, n]`` (Discrete) or ``[B, K, M]`` (MultiDiscrete)."""
        return self.masked_log_probs(self.actor(x), obs, sampling)

    def masked_log_probs(self, logits: torch.Tensor, obs: dict[str, torch.Tensor], sampling: bool = False
                         ) -> torch.Tensor:
        """The actor's ``logits [B, n_out]`` as masked log-probabilities (:meth:`_log_probs`): a
        masked action's logit is the most negative float, so its probability is 0. ``sampling``:
        in the layout the draw's ``argmax`` reads fast (the update's ``gather`` and sums read
        :func:`layouts.log_softmax`'s faster)."""
        low = torch.finfo(logits.dtype).min
        mask = obs.get(ACTION_MASK)
        if mask is not None:
            logits = logits.masked_fill(~mask, low)
        if self.multi:
            K, M = self.grid
            logits = logits.new_full((logits.shape[0], K * M), low).index_copy_(1, self.slots, logits).view(-1, K, M)
        return torch.log_softmax(logits, dim=-1) if sampling else layouts.log_softmax(logits)

    # -- heads ---------------------------------------------------------------------------
    def sample(self, xa: torch.Tensor, obs: dict[str, torch.Tensor], deterministic: bool):
        """``(action, logp[B])`` from actor features ``xa[B, F]``."""
        if self.discrete or self.multi:
            logp_all = self._log_probs(xa, obs, sampling=True)
            if deterministic:
                action = logp_all.argmax(-1)
            else:
                # Gumbel-max: argmax(log p + Gumbel noise), Gumbel = -log(Exp(1)). Same
                # distribution as multinomial, ~4x cheaper per step for small batches.
                action = (logp_all - torch.empty_like(logp_all).exponential_().log()).argmax(-1)
            logp = logp_all.gather(-1, action.unsqueeze(-1)).squeeze(-1)
            return action, logp.sum(-1) if self.multi else logp
        mean = self.actor(xa)
        std = self.log_std.exp()
        action = mean if deterministic else mean + std * torch.randn_like(mean)
        logp = self._gauss_logp(action, mean)
        return action.reshape(action.shape[0], *self.action_shape), logp

    def score(self, xa: torch.Tensor, obs: dict[str, torch.Tensor], action: torch.Tensor):
        """``(logp[B], entropy[B])`` of ``action`` from actor features ``xa[B, F]``, differentiable."""
        if self.discrete or self.multi:
            logp_all = self._log_probs(xa, obs)
            logp = logp_all.gather(-1, action.long().unsqueeze(-1)).squeeze(-1)
            # Masked actions and padding have p == 0 and a finite log p, so p * log p is 0.
            entropy = -(logp_all.exp() * logp_all).sum(-1)
            if self.multi:
                logp, entropy = logp.sum(-1), entropy.sum(-1)
            return logp, entropy
        mean = self.actor(xa)
        return self._gauss_logp(action.reshape(mean.shape), mean), self.gauss_entropy(mean.shape[0])

    def gauss_entropy(self, rows: int) -> torch.Tensor:
        """``[rows]``: the Gaussian head's entropy, the same for every row (``log_std`` is state-independent)."""
        return (0.5 + 0.5 * _LOG_2PI + self.log_std).sum().expand(rows)

    def _gauss_logp(self, action: torch.Tensor, mean: torch.Tensor) -> torch.Tensor:
        z = (action - mean) * torch.exp(-self.log_std)
        return (-0.5 * z.square() - self.log_std - 0.5 * _LOG_2PI).sum(-1)

    # -- ActorCriticNetwork ----------------------------------------------------------------
    def value(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.critic(self.encode(obs)[1]).squeeze(-1)

    @torch.no_grad()
    def act(self, obs: dict[str, torch.Tensor], deterministic: bool = False):
        """Sample actions; returns ``(action, logp[B], value[B])``."""
        xa, xc = self.encode(obs)
        action, logp = self.sample(xa, obs, deterministic)
        return action, logp, self.critic(xc).squeeze(-1)

    def evaluate(self, obs: dict[str, torch.Tensor], action: torch.Tensor):
        """Log-prob and entropy of ``action`` under the current policy, and the value:
        ``(logp[B], entropy[B], value[B])``, differentiable."""
        xa, xc = self.encode(obs)
        logp, entropy = self.score(xa, obs, action)
        return logp, entropy, self.critic(xc).squeeze(-1)


def _cat(parts: list[torch.Tensor]) -> torch.Tensor:
    return parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)


class RecurrentActorCritic(ActorCritic):
    """Encoders -> GRU/LSTM core (``model.recurrent``, ``model.recurrent_size``) -> actor and
    critic heads. With ``share_encoder: false`` the critic has its own encoders and core. The
    state ``[B, S]`` is the actor core's state, then the critic core's where it has one."""

    def __init__(self, obs_spec: dict[str, TensorSpec], action_spec: Discrete | MultiDiscrete | Box,
                 cfg: ModelConfig):
        super().__init__(obs_spec, action_spec, cfg)
        self.core = RecurrentCore(cfg.recurrent, self.feature_dim, cfg.recurrent_size)
        self.critic_core = None if cfg.share_encoder else RecurrentCore(cfg.recurrent, self.feature_dim,
                                                                         cfg.recurrent_size)
        self.state_size = self.core.state_size * (1 if self.critic_core is None else 2)

    def head_input_dim(self, cfg: ModelConfig) -> int:
        return cfg.recurrent_size

    def initial_state(self, batch: int) -> torch.Tensor:
        """The state of an env whose episode begins: zeros ``[batch, S]``."""
        return torch.zeros(batch, self.state_size, device=self.actor[0].weight.device)

    def _step(self, obs: dict[str, torch.Tensor], state: torch.Tensor):
        """One step of every env: ``(h_actor, h_critic, new_state)``."""
        xa, xc = self.encode(obs)
        S = self.core.state_size
        ha, sa = self.core.step(xa, state[:, :S])
        if self.critic_core is None:
            return ha, ha, sa
        hc, sc = self.critic_core.step(xc, state[:, S:])
        return ha, hc, torch.cat([sa, sc], dim=1)

    def value(self, obs: dict[str, torch.Tensor], state: torch.Tensor) -> torch.Tensor:
        """``value[B]`` of ``obs`` seen with ``state`` (the state is not advanced)."""
        return self.critic(self._step(obs, state)[1]).squeeze(-1)

    @torch.no_grad()
    def act(self, obs: dict[str, torch.Tensor], state: torch.Tensor, deterministic: bool = False):
        """``(action, logp[B], value[B], new_state[B, S])``."""
        ha, hc, new_state = self._step(obs, state)
        action, logp = self.sample(ha, obs, deterministic)
        return action, logp, self.critic(hc).squeeze(-1), new_state

    def evaluate(self, obs, action):
        raise TypeError("a recurrent policy is evaluated over sequences: evaluate_sequence(obs, action, state0, reset)")

    def evaluate_sequence(self, obs: dict[str, torch.Tensor], action: torch.Tensor, state0: torch.Tensor,
                          reset: torch.Tensor):
        """``(logp, entropy, value)``, each ``[T, B]``, of ``obs[T, B, ...]`` and ``action[T, B, ...]``
        replayed from ``state0[B, S]`` with the state zeroed where ``reset[T, B]``; differentiable
        through time (BPTT)."""
        T, B = reset.shape
        flat = {k: v.flatten(0, 1) for k, v in obs.items()}
        xa, xc = self.encode(flat)  # the encoders see all T * B rows at once
        S = self.core.state_size
        ha = self.core.sequence(xa.view(T, B, -1), state0[:, :S], reset).flatten(0, 1)
        hc = ha if self.critic_core is None else \
            self.critic_core.sequence(xc.view(T, B, -1), state0[:, S:], reset).flatten(0, 1)
        logp, entropy = self.score(ha, flat, action.flatten(0, 1))
        return logp.view(T, B), entropy.view(T, B), self.critic(hc).view(T, B)
