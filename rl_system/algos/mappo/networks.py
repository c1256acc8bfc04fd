"""Multi-agent PPO's actor-critic: every agent acts from its own observation; its value comes from
the global state (MAPPO) or from its own observation (IPPO).

Shapes: ``B`` env steps, ``n`` agents, ``O`` an agent's observation width, ``S`` the state's.
The layers are :class:`AgentLinear`: one weight for all agents (``share_params``: the agent's
index rides along one-hot, so a shared network can still act differently per agent) or one per
agent, applied to all agents in one batched product either way.

A central critic gives the agents' values per agent (``mappo.central_value: per_agent``: the
state and the agent's one-hot index through the critic, ``n`` rows ``[B, n, S + n]``) or jointly
(``joint``: the state alone, one row ``[B, 1, S]``, through one network whose last layer has ``n``
outputs, agent ``i``'s value its output ``i``): the joint critic runs once per env step.

With ``mappo.recurrent`` (:class:`RecurrentMultiAgentActorCritic`) the actor and the critic each
put an :class:`AgentRecurrent` core (GRU or LSTM, shared or per agent as the layers are) between
their inputs and their layers; its state is ``[B, n, S]``, a row per agent (a joint critic's
core keeps one state per env, written into every agent's row).
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import torch
from torch import nn

from rl_system.algos import layouts
from rl_system.algos.mappo.config import MAPPOConfig
from rl_system.algos.recurrent import unroll
from rl_system.algos.value_norm import ValueNorm
from rl_system.envs.base import (
    ACTION_MASK,
    AGENT_ACTIVE,
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


class AgentRecurrent(nn.Module):
    """A GRU or LSTM cell over ``[B, n, in]`` rows with a state ``[B, n, S]`` (GRU: ``S = H``;
    LSTM: ``S = 2H``, ``h`` then ``c``), its weights shared by the agents or one set per agent as
    :class:`AgentLinear`'s. The gates are torch's ``GRUCell``/``LSTMCell``'s; the init is
    :class:`~rl_system.algos.recurrent.RecurrentCore`'s (orthogonal weights, zero biases)."""

    def __init__(self, kind: str, n_in: int, hidden: int, groups: int):
        super().__init__()
        gates = {"gru": 3, "lstm": 4}[kind]
        self.kind, self.hidden = kind, hidden
        self.state_size = hidden if kind == "gru" else 2 * hidden
        self.inp = AgentLinear(n_in, gates * hidden, groups, 1.0)
        self.rec = AgentLinear(hidden, gates * hidden, groups, 1.0)

    def gates(self, x: torch.Tensor) -> torch.Tensor:
        """The inputs' share of the gates, ``[B, n, in] -> [B, n, gates * H]``: one product for
        every step of a sequence (``B`` its steps and envs), before the unroll."""
        return self.inp(x)

    def step(self, gx: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(h [B, n, H], new state [B, n, S])`` from the inputs' gates ``gx`` and the state."""
        if self.kind == "gru":
            xr, xz, xn = gx.chunk(3, dim=-1)
            hr, hz, hn = self.rec(state).chunk(3, dim=-1)
            r, z = torch.sigmoid(xr + hr), torch.sigmoid(xz + hz)
            h = (1 - z) * torch.tanh(xn + r * hn) + z * state
            return h, h
        h, c = state.split(self.hidden, dim=-1)
        i, f, g, o = (gx + self.rec(h)).chunk(4, dim=-1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        return h, torch.cat([h, c], dim=-1)


def action_width(spec: AgentActionSpec) -> int:
    """The actor's outputs per agent: logits (discrete), or the Gaussian's means (continuous)."""
    if isinstance(spec, AgentDiscrete):
        return spec.n
    if isinstance(spec, AgentMultiDiscrete):
        return sum(spec.nvec)
    return math.prod(spec.agent_shape)


class MultiAgentActorCritic(nn.Module):
    """Actor ``[B, n, O (+ n)] -> [B, n, A]`` and critic ``[B, n, S or O (+ n)] -> [B, n]`` (a joint
    critic: ``[B, 1, S] -> [B, n]``).

    ``act``/``evaluate``/``value`` take the env's observation dict (:data:`STATE` ``[B, S]``,
    :data:`AGENT_OBS` ``[B, n, O]``, optional :data:`ACTION_MASK` ``[B, n, width]``) and give
    per-agent tensors ``[B, n]``; actions are ``[B, n]`` (discrete), ``[B, n, K]``
    (multi-discrete) or ``[B, n, d]`` (continuous: a Gaussian draw, unclipped, the env clips; or,
    with ``action_dist: tanh_normal``, squashed into the bounds, :class:`BoxHead`)."""

    def __init__(self, obs_spec: dict[str, TensorSpec], action_spec: AgentActionSpec, cfg: MAPPOConfig):
        super().__init__()
        n = action_spec.num_agents
        self.spec, self.num_agents, self.central = action_spec, n, cfg.critic == "central"
        self.joint = self.central and cfg.central_value == "joint"
        groups = 1 if cfg.share_params else n
        ids = n if cfg.share_params else 0  # a network per agent knows whose it is
        obs_dim, state_dim = obs_spec[AGENT_OBS].shape[1], obs_spec[STATE].shape[0]
        self.register_buffer("agent_ids", torch.eye(n)[:, :ids].clone(), persistent=False)
        self.actor_in, self.critic_in = obs_dim + ids, (state_dim if self.central else obs_dim) + ids
        self.actor = agent_mlp(self.head_in(self.actor_in, cfg), cfg.hidden_sizes, action_width(action_spec), groups,
                               cfg.activation, 0.01)
        if self.joint:  # one network, one row per env step, a value per agent out
            self.critic_in = state_dim
            self.critic = agent_mlp(self.head_in(state_dim, cfg), cfg.hidden_sizes, n, 1, cfg.activation, 1.0)
        else:
            self.critic = agent_mlp(self.head_in(self.critic_in, cfg), cfg.hidden_sizes, 1, groups, cfg.activation,
                                    1.0)
        # Buffers: they ship with the weights and the checkpoints. None without value normalisation.
        self.value_norm = ValueNorm() if cfg.value_norm else None
        if isinstance(action_spec, AgentBox):
            self.log_std = nn.Parameter(torch.full((groups, action_width(action_spec)), cfg.init_log_std))
            scale, shift = squash_bounds(action_spec) if cfg.action_dist == "tanh_normal" else (None, None)
            # None for a plain Gaussian; not in checkpoints (the env's bounds give them)
            self.register_buffer("squash_scale", scale, persistent=False)
            self.register_buffer("squash_shift", shift, persistent=False)

    def head_in(self, n_in: int, cfg: MAPPOConfig) -> int:
        """The width the layers take from an input of ``n_in`` per agent."""
        return n_in

    # -- inputs --------------------------------------------------------------------------------
    def _with_ids(self, x: torch.Tensor) -> torch.Tensor:
        """``[B, n, F] -> [B, n, F + ids]``."""
        if not self.agent_ids.shape[1]:
            return x
        return torch.cat([x, self.agent_ids.expand(x.shape[0], -1, -1)], dim=-1)

    def _critic_in(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        """``[B, n, F]`` rows, one per agent, or a joint critic's one row ``[B, 1, S]``."""
        if self.joint:
            return obs[STATE].unsqueeze(1)
        if self.central:
            state = obs[STATE]
            return self._with_ids(state.unsqueeze(1).expand(-1, self.num_agents, -1))
        return self._with_ids(obs[AGENT_OBS])

    def value(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        """``[B, n]``: each agent's value."""
        return self.critic(self._critic_in(obs)).flatten(1)

    # -- the policy ----------------------------------------------------------------------------
    def box_head(self) -> BoxHead | None:
        """The continuous actions' distribution, None for discrete ones."""
        if not isinstance(self.spec, AgentBox):
            return None
        # std [groups, d]: broadcasts over the agents
        return BoxHead(self.log_std.exp(), self.squash_scale, self.squash_shift)

    def act(self, obs: dict[str, torch.Tensor], deterministic: bool = False
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(action, logp [B, n], value [B, n])``, no grad."""
        action, logp = self.sample(self.actor(self._with_ids(obs[AGENT_OBS])), obs, deterministic)
        return action, logp, self.value(obs)

    def evaluate(self, obs: dict[str, torch.Tensor], action: torch.Tensor
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(logp, entropy, value)`` ``[B, n]`` each of ``action``, differentiable."""
        logp, entropy = self.score(self.actor(self._with_ids(obs[AGENT_OBS])), obs, action)
        return logp, entropy, self.value(obs)

    def sample(self, out: torch.Tensor, obs: dict[str, torch.Tensor], deterministic: bool
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(action, logp [B, n])`` drawn from the actor's outputs ``out`` (the mode where ``deterministic``)."""
        return choose(self.spec, out, obs.get(ACTION_MASK), self.box_head(), deterministic)

    def score(self, out: torch.Tensor, obs: dict[str, torch.Tensor], action: torch.Tensor
              ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(logp, entropy)`` ``[B, n]`` of ``action`` under the actor's outputs ``out``, differentiable."""
        head = self.box_head()
        if head is not None:
            logp, log_jacobian = _box_logp(head, action, out)
            entropy = (0.5 + 0.5 * math.log(2 * math.pi) + head.std.log()).sum(-1).expand_as(logp)
            # tanh_normal: H = H[Gaussian] + E[log |da/du|], estimated at the rollout's action
            return logp, entropy + log_jacobian
        parts = _log_probs(self.spec, out, obs.get(ACTION_MASK)).split(_widths(self.spec), dim=-1)
        taken = action.unsqueeze(-1) if isinstance(self.spec, AgentDiscrete) else action
        logp = sum(p.gather(-1, taken[..., k:k + 1]).squeeze(-1) for k, p in enumerate(parts))
        return logp, sum(-(p.exp() * p).sum(-1) for p in parts)


class BoxHead(NamedTuple):
    """A continuous action's distribution around the actor's output ``out [B, n, d]``: a diagonal
    Gaussian of ``std`` (broadcasting over ``out``), its draw ``u`` the action itself, or, where
    ``scale`` and ``shift`` (``[d]``) are set (``action_dist: tanh_normal``), squashed into the
    bounds: ``action = shift + scale * tanh(u)``."""

    std: torch.Tensor
    scale: torch.Tensor | None
    shift: torch.Tensor | None


def squash_bounds(spec: AgentBox) -> tuple[torch.Tensor, torch.Tensor]:
    """``(scale, shift)`` ``[d]`` taking tanh's ``(-1, 1)`` onto ``spec``'s ``[low, high]``."""
    low, high = torch.tensor(spec.low, dtype=torch.float32), torch.tensor(spec.high, dtype=torch.float32)
    if not (torch.isfinite(low).all() and torch.isfinite(high).all()) or not (high > low).all():
        raise ValueError(f"mappo.action_dist: tanh_normal needs finite bounds with low < high, got low {spec.low} "
                         f"and high {spec.high}; use action_dist: gaussian")
    return (high - low) / 2, (high + low) / 2


def choose(spec: AgentActionSpec, out: torch.Tensor, mask: torch.Tensor | None, head: BoxHead | None,
           deterministic: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """``(action, logp)`` from the actor's outputs ``out [B, n, A]`` (``mask [B, n, width]``
    where the env masks actions; ``head`` for continuous ones)."""
    if isinstance(spec, AgentBox):
        u = out if deterministic else out + head.std * torch.randn_like(out)
        if head.scale is None:
            return u, _gaussian_logp(u, out, head.std)
        action = head.shift + head.scale * torch.tanh(u)
        # logp from the action, as the update will score it: the ratio starts at 1 exactly
        return action, _box_logp(head, action, out)[0]
    parts = _log_probs(spec, out, mask, sampling=True).split(_widths(spec), dim=-1)
    choice = [p.argmax(-1) if deterministic else _sample(p) for p in parts]
    logp = sum(p.gather(-1, c.unsqueeze(-1)).squeeze(-1) for p, c in zip(parts, choice))
    return (choice[0] if isinstance(spec, AgentDiscrete) else torch.stack(choice, dim=-1)), logp


def _log_probs(spec: AgentActionSpec, out: torch.Tensor, mask: torch.Tensor | None, sampling: bool = False
               ) -> torch.Tensor:
    """Masked log-probabilities ``[B, n, width]``: a masked action's logit is the most negative
    float, so its probability is 0. ``sampling``: in the layout the draw's ``argmax`` reads fast
    (a scorer's ``gather`` and sums read :func:`layouts.log_softmax`'s faster)."""
    if mask is not None:
        out = out.masked_fill(~mask, torch.finfo(out.dtype).min)
    log_softmax = functools.partial(torch.log_softmax, dim=-1) if sampling else layouts.log_softmax
    if isinstance(spec, AgentDiscrete):
        return log_softmax(out)
    return torch.cat([log_softmax(part) for part in out.split(spec.nvec, dim=-1)], dim=-1)


def _widths(spec: AgentActionSpec) -> list[int]:
    return [spec.n] if isinstance(spec, AgentDiscrete) else list(spec.nvec)


class RecurrentMultiAgentActorCritic(MultiAgentActorCritic):
    """Inputs -> :class:`AgentRecurrent` core -> layers, for the actor and for the critic (each its
    own core: their inputs differ under a central critic). A
    :class:`~rl_system.algos.protocols.RecurrentActorCriticNetwork` whose state is ``[B, n, S]``:
    per agent, the actor core's state then the critic core's.

    An agent that is inactive (``agent_active`` false) holds its state: the step's outputs are
    computed (and carry no loss), its memory is kept as it was. A joint critic's core
    (``central_value: joint``) keeps one state per env, copied into every agent's row (so the
    state keeps its shape for the sampler, the rollout and the export) and read from row 0; it
    goes on while an agent waits, as the env's state does."""

    def __init__(self, obs_spec: dict[str, TensorSpec], action_spec: AgentActionSpec, cfg: MAPPOConfig):
        super().__init__(obs_spec, action_spec, cfg)
        groups = 1 if cfg.share_params else self.num_agents
        self.actor_core = AgentRecurrent(cfg.recurrent, self.actor_in, cfg.recurrent_size, groups)
        self.critic_core = AgentRecurrent(cfg.recurrent, self.critic_in, cfg.recurrent_size, 1 if self.joint else groups)
        self.state_size = self.actor_core.state_size + self.critic_core.state_size
        """Per agent."""

    def head_in(self, n_in: int, cfg: MAPPOConfig) -> int:
        return cfg.recurrent_size

    def initial_state(self, batch: int) -> torch.Tensor:
        """The state of an env whose episode begins: zeros ``[batch, n, S]``."""
        return torch.zeros(batch, self.num_agents, self.state_size, device=self.agent_ids.device)

    def _critic_state(self, state: torch.Tensor) -> torch.Tensor:
        """The critic core's state in ``state [B, n, S]``: ``[B, n, Sc]``, or a joint critic's ``[B, 1, Sc]``."""
        S = self.actor_core.state_size
        return state[:, :1, S:] if self.joint else state[..., S:]

    def _step(self, obs: dict[str, torch.Tensor], state: torch.Tensor
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One step of every env: ``(h_actor, h_critic, new_state)``."""
        S = self.actor_core.state_size
        ha, sa = self.actor_core.step(self.actor_core.gates(self._with_ids(obs[AGENT_OBS])), state[..., :S])
        hc, sc = self.critic_core.step(self.critic_core.gates(self._critic_in(obs)), self._critic_state(state))
        active = obs.get(AGENT_ACTIVE)
        if self.joint:  # only the actor's state is an agent's to hold
            if active is not None:
                sa = torch.where(active.unsqueeze(-1), sa, state[..., :S])
            return ha, hc, torch.cat([sa, sc.expand(-1, self.num_agents, -1)], dim=-1)
        new_state = torch.cat([sa, sc], dim=-1)
        if active is not None:
            new_state = torch.where(active.unsqueeze(-1), new_state, state)
        return ha, hc, new_state

    def value(self, obs: dict[str, torch.Tensor], state: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        """``[B, n]``: each agent's value of ``obs`` seen with ``state`` (not advanced)."""
        hc, _ = self.critic_core.step(self.critic_core.gates(self._critic_in(obs)), self._critic_state(state))
        return self.critic(hc).flatten(1)

    def act(self, obs: dict[str, torch.Tensor], state: torch.Tensor,  # type: ignore[override]
            deterministic: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(action, logp [B, n], value [B, n], new_state [B, n, S])``, no grad."""
        ha, hc, new_state = self._step(obs, state)
        action, logp = self.sample(self.actor(ha), obs, deterministic)
        return action, logp, self.critic(hc).flatten(1), new_state

    def evaluate(self, obs, action):
        raise TypeError("a recurrent policy is evaluated over sequences: evaluate_sequence(obs, action, state0, reset)")

    def evaluate_sequence(self, obs: dict[str, torch.Tensor], action: torch.Tensor, state0: torch.Tensor,
                          reset: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(logp, entropy, value)``, each ``[T, B, n]``, of ``obs[T, B, ...]`` and ``action[T, B, n, ...]``
        replayed from ``state0[B, n, S]``, every agent's state zeroed where ``reset[T, B]`` (its env's
        episode began) and held where it is inactive (a joint critic's goes on); differentiable
        through time (BPTT)."""
        T, B = reset.shape
        n, S = self.num_agents, self.actor_core.state_size
        flat = {k: v.flatten(0, 1) for k, v in obs.items()}
        active = obs.get(AGENT_ACTIVE)
        hold = None if active is None else ~active

        def run(core: AgentRecurrent, x: torch.Tensor, state: torch.Tensor, hold: torch.Tensor | None
                ) -> torch.Tensor:
            rows = state.shape[1]  # n, or a joint critic's 1
            resets = reset.unsqueeze(-1).expand(T, B, rows)
            return unroll(core.step, core.gates(x).view(T, B, rows, -1), state, resets, hold=hold).flatten(0, 1)

        ha = run(self.actor_core, self._with_ids(flat[AGENT_OBS]), state0[..., :S], hold)
        hc = run(self.critic_core, self._critic_in(flat), self._critic_state(state0), None if self.joint else hold)
        logp, entropy = self.score(self.actor(ha), flat, action.flatten(0, 1))
        return logp.view(T, B, n), entropy.view(T, B, n), self.critic(hc).view(T, B, n)


def _sample(logp: torch.Tensor) -> torch.Tensor:
    """One draw per row of ``[..., A]`` log-probabilities -> ``[...]`` int64."""
    flat = logp.reshape(-1, logp.shape[-1]).exp()
    return torch.multinomial(flat, 1).reshape(logp.shape[:-1])


_TANH_EDGE = 1.0 - 1e-6
"""A squashed action at a bound holds tanh's ±1 (float32 rounds tanh(u) to 1 from u ≈ 9): it is
scored as the draw at ±(1 - 1e-6), u ≈ ±7.25, with a finite log-density."""


def _box_logp(head: BoxHead, action: torch.Tensor, out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(logp, log_jacobian)`` ``[B, n]`` of a continuous ``action [B, n, d]``; ``log_jacobian`` is
    ``sum log |d action / du|`` (0 for a plain Gaussian), what squashing takes from the draw's log-density."""
    if head.scale is None:
        logp = _gaussian_logp(action, out, head.std)
        return logp, torch.zeros_like(logp)
    y = ((action - head.shift) / head.scale).clamp(-_TANH_EDGE, _TANH_EDGE)
    log_jacobian = (head.scale.log() + torch.log1p(-y.square())).sum(-1)
    u = 0.5 * (torch.log1p(y) - torch.log1p(-y))  # atanh(y), in ops the ONNX exporter knows
    return _gaussian_logp(u, out, head.std) - log_jacobian, log_jacobian


def _gaussian_logp(action: torch.Tensor, mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    """``[B, n, d] -> [B, n]``: the log-density of a diagonal Gaussian, summed over the dims."""
    z = (action - mean) / std
    return (-0.5 * z.square() - std.log() - 0.5 * math.log(2 * math.pi)).sum(-1)
