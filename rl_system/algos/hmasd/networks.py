"""HMASD networks, all in one :class:`HMASDPolicy` module (one ``state_dict`` = one policy version).

* :class:`SkillCoordinator` (high level, centralised): a MAT-style transformer. The encoder
  reads the tokens ``(s, o_1..o_n)`` and gives the values ``V_h(ŝ), V_h(ô_1..ô_n)``; the decoder
  chooses ``Z`` then ``z_1, z_2, ...`` autoregressively (token j sees the encoder output of token
  j and the choices before it). Training evaluates stored ``(Z, z_1..n)`` in one pass with a
  causal mask (teacher forcing).
* :class:`SkillDiscoverer` (low level): shared actor ``pi_l(a_i | o_i, z_i)`` and centralised
  critic ``V_l(s, Z, z_i)``, each MLP -> GRU -> MLP, with an agent-id embedding.
* :class:`Discriminators`: ``q_D(Z | s)`` and ``q_d(z_i | o_i, Z)``.
* :class:`~rl_system.algos.value_norm.ValueNorm`: MAPPO's running mean/std of value targets, as module buffers.

With ``hierarchy: false`` only the discoverer (without skill inputs) and one ValueNorm exist:
that is flat recurrent MAPPO.

One-hot inputs are implemented as embedding lookups added to the first linear layer's output
(mathematically the same as concatenating one-hots, without building them every step).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from rl_system.algos import layouts
from rl_system.algos.hmasd.config import HMASDConfig
from rl_system.algos.hmasd.novelty import RandomNetworkDistillation
from rl_system.algos.precision import Float32Linear
from rl_system.algos.recurrent import unroll
from rl_system.algos.value_norm import ValueNorm


class _Attention(nn.Module):
    """Multi-head attention over a handful of tokens, optional causal mask."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads, self.dh = heads, dim // heads
        self.q, self.k, self.v, self.out = (nn.Linear(dim, dim) for _ in range(4))

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, causal: bool) -> torch.Tensor:
        B, L, D = query.shape
        q = self.q(query).view(B, L, self.heads, self.dh).transpose(1, 2)
        k = self.k(key).view(B, L, self.heads, self.dh).transpose(1, 2)
        v = self.v(value).view(B, L, self.heads, self.dh).transpose(1, 2)
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.dh)
        if causal:
            mask = torch.ones(L, L, dtype=torch.bool, device=query.device).triu(1)
            scores = scores.masked_fill(mask, float("-inf"))
        return self.out((scores.softmax(-1) @ v).transpose(1, 2).reshape(B, L, D))


class _EncoderBlock(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.attn, self.ln1, self.ln2 = _Attention(dim, heads), nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.ln1(x + self.attn(x, x, x, causal=False))
        return self.ln2(x + self.mlp(x))


class _DecoderBlock(nn.Module):
    """MAT's decoder block: causal self-attention over the (shifted) skill embeddings, then
    causal attention with the encoder output of each position as the query."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.attn1, self.attn2 = _Attention(dim, heads), _Attention(dim, heads)
        self.ln1, self.ln2, self.ln3 = nn.LayerNorm(dim), nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, dim))

    def forward(self, x: torch.Tensor, rep: torch.Tensor) -> torch.Tensor:
        x = self.ln1(x + self.attn1(x, x, x, causal=True))
        x = self.ln2(rep + self.attn2(rep, x, x, causal=True))
        return self.ln3(x + self.mlp(x))


class SkillCoordinator(nn.Module):
    """High-level policy over the joint skill ``(Z, z_1..z_n)`` and its values, MAT-style.

    Token 0 is the state / the team skill ``Z``; token ``i`` is agent ``i``'s observation / its
    skill ``z_i``. Decoder input at position ``j`` is the choice of position ``j - 1`` (a start
    token at 0), so position ``j``'s logits depend only on choices before ``j``.
    """

    def __init__(self, state_dim: int, obs_dim: int, n_agents: int, n_Z: int, n_z: int,
                 dim: int = 64, heads: int = 2, layers: int = 1):
        super().__init__()
        self.n_agents, self.n_Z, self.n_z = n_agents, n_Z, n_z
        self.state_in = nn.Sequential(nn.LayerNorm(state_dim), nn.Linear(state_dim, dim), nn.GELU())
        self.obs_in = nn.Sequential(nn.LayerNorm(obs_dim), nn.Linear(obs_dim, dim), nn.GELU())
        self.enc_pos = nn.Parameter(torch.zeros(n_agents + 1, dim))
        self.encoder = nn.ModuleList(_EncoderBlock(dim, heads) for _ in range(layers))
        self.value_head = nn.Sequential(nn.Linear(dim, dim), nn.GELU(), Float32Linear(dim, 1))
        # Decoder tokens: 0 = start, 1..n_Z = team skills, 1+n_Z.. = individual skills.
        self.skill_emb = nn.Embedding(1 + n_Z + n_z, dim)
        self.dec_pos = nn.Parameter(torch.zeros(n_agents + 1, dim))
        self.decoder = nn.ModuleList(_DecoderBlock(dim, heads) for _ in range(layers))
        self.head_Z = nn.Sequential(nn.Linear(dim, dim), nn.GELU(), Float32Linear(dim, n_Z))
        self.head_z = nn.Sequential(nn.Linear(dim, dim), nn.GELU(), Float32Linear(dim, n_z))
        nn.init.normal_(self.enc_pos, std=0.02)
        nn.init.normal_(self.dec_pos, std=0.02)

    def encode(self, state: torch.Tensor, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """state ``[B, S]``, obs ``[B, n, O]`` -> (representations ``[B, n+1, d]``, values ``[B, n+1]``)."""
        x = torch.cat([self.state_in(state).unsqueeze(1), self.obs_in(obs)], dim=1) + self.enc_pos
        for block in self.encoder:
            x = block(x)
        return x, self.value_head(x).squeeze(-1)

    def values(self, state: torch.Tensor, obs: torch.Tensor) -> torch.Tensor:
        return self.encode(state, obs)[1]

    def _tokens(self, Z: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """Decoder input indices ``[B, n+1]``: start, Z, z_1..z_{n-1} (shifted by one)."""
        start = torch.zeros_like(Z)
        return torch.cat([start.unsqueeze(1), (1 + Z).unsqueeze(1), 1 + self.n_Z + z[:, :-1]], dim=1)

    def _decode(self, rep: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        L = tokens.shape[1]
        x = self.skill_emb(tokens) + self.dec_pos[:L]
        for block in self.decoder:
            x = block(x, rep[:, :L])
        return x

    def logits(self, rep: torch.Tensor, Z: torch.Tensor, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Teacher-forced logits in one pass: ``([B, n_Z], [B, n, n_z])``."""
        x = self._decode(rep, self._tokens(Z, z))
        return self.head_Z(x[:, 0]), self.head_z(x[:, 1:])

    def evaluate(self, state: torch.Tensor, obs: torch.Tensor, Z: torch.Tensor, z: torch.Tensor):
        """Log-probs ``[B, n+1]``, entropies ``[B, n+1]`` of stored ``(Z, z)`` and values ``[B, n+1]``."""
        rep, value = self.encode(state, obs)
        lZ, lz = self.logits(rep, Z, z)
        lZ, lz = layouts.log_softmax(lZ), layouts.log_softmax(lz)
        logp = torch.cat([lZ.gather(1, Z.unsqueeze(1)), lz.gather(2, z.unsqueeze(2)).squeeze(2)], dim=1)
        ent = torch.cat([-(lZ.exp() * lZ).sum(-1, keepdim=True), -(lz.exp() * lz).sum(-1)], dim=1)
        return logp, ent, value

    @torch.no_grad()
    def act(self, state: torch.Tensor, obs: torch.Tensor, deterministic: bool = False):
        """Autoregressive choice: returns ``Z [B]``, ``z [B, n]``, log-probs ``[B, n+1]``, values ``[B, n+1]``."""
        rep, value = self.encode(state, obs)
        B, n = state.shape[0], self.n_agents
        tokens = torch.zeros(B, 1, dtype=torch.long, device=state.device)
        choices, logps = [], []
        for j in range(n + 1):
            x = self._decode(rep, tokens)[:, j]
            logp = (self.head_Z(x) if j == 0 else self.head_z(x)).log_softmax(-1)
            c = logp.argmax(-1) if deterministic else torch.multinomial(logp.exp(), 1).squeeze(1)
            choices.append(c)
            logps.append(logp.gather(1, c.unsqueeze(1)).squeeze(1))
            if j < n:
                nxt = 1 + c if j == 0 else 1 + self.n_Z + c
                tokens = torch.cat([tokens, nxt.unsqueeze(1)], dim=1)
        return choices[0], torch.stack(choices[1:], dim=1), torch.stack(logps, dim=1), value


class _RecurrentNet(nn.Module):
    """MLP -> GRU -> MLP on flat rows; ``embeds`` are added to the first layer's output (the
    one-hot inputs: agent id, skills)."""

    def __init__(self, in_dim: int, out_dim: int, hidden: int, embed_sizes: list[int]):
        super().__init__()
        self.inp = nn.Sequential(nn.LayerNorm(in_dim), nn.Linear(in_dim, hidden))
        self.embeds = nn.ModuleList(nn.Embedding(k, hidden) for k in embed_sizes)
        self.gru = nn.GRUCell(hidden, hidden)
        self.out = nn.Sequential(nn.LayerNorm(hidden), nn.Linear(hidden, hidden), nn.ReLU(), Float32Linear(hidden, out_dim))

    def features(self, x: torch.Tensor, ids: list[torch.Tensor]) -> torch.Tensor:
        h = self.inp(x)
        for emb, i in zip(self.embeds, ids):
            h = h + emb(i)
        return F.relu(h)

    def step(self, x, ids, h):
        """One step: rows ``[B, in]`` + hidden ``[B, H]`` -> (output ``[B, out]``, new hidden)."""
        h = self.gru(self.features(x, ids), h)
        return self.out(h), h

    def _gru_step(self, x: torch.Tensor, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.gru(x, h)
        return h, h

    @torch.no_grad()
    def hiddens(self, x, ids, h0, reset):
        """Hidden entering each step (before its reset) ``[T, B, H]``: x ``[T, B, in]``, h0 ``[B, H]``,
        reset ``[T, B]`` (hidden zeroed before step t)."""
        return unroll(self._gru_step, self.features(x, ids), h0, reset, entering=True)

    def sequence(self, x, ids, h0, reset):
        """Recurrent pass with gradients: x ``[L, B, in]``, h0 ``[B, H]`` (hidden entering step 0),
        reset ``[L, B]`` -> outputs ``[L, B, out]``."""
        return self.out(unroll(self._gru_step, self.features(x, ids), h0, reset))


class SkillDiscoverer(nn.Module):
    """Low level: actor ``pi_l(a_i | o_i, z_i, i)`` and critic ``V_l(s, Z, z_i, i)``, shared by the
    agents; with ``hierarchy=False`` the skill inputs are absent (MAPPO actor/critic)."""

    def __init__(self, state_dim: int, obs_dim: int, n_agents: int, n_actions: int, cfg: HMASDConfig):
        super().__init__()
        self.n_agents, self.hidden, self.hierarchy = n_agents, cfg.hidden, cfg.hierarchy
        skills = cfg.hierarchy
        self.actor = _RecurrentNet(obs_dim, n_actions, cfg.hidden,
                                   [n_agents] + ([cfg.n_agent_skills] if skills else []))
        self.critic = _RecurrentNet(state_dim, 1, cfg.hidden,
                                    [n_agents] + ([cfg.n_team_skills, cfg.n_agent_skills] if skills else []))
        self.register_buffer("agent_ids", torch.arange(n_agents), persistent=False)

    def inputs(self, state, obs, Z, z):
        """Per-agent rows (any leading dims ``L``): actor ``(obs [L, n, O], ids)``, critic
        ``(state [L, n, S], ids)``."""
        lead = obs.shape[:-2]
        agent = self.agent_ids.expand(*lead, self.n_agents)
        s = state.unsqueeze(-2).expand(*lead, self.n_agents, state.shape[-1])
        if not self.hierarchy:
            return (obs, [agent]), (s, [agent])
        Zi = Z.unsqueeze(-1).expand(*lead, self.n_agents)
        return (obs, [agent, z]), (s, [agent, Zi, z])

    @torch.no_grad()
    def act(self, state, obs, Z, z, h_actor, h_critic, deterministic: bool = False):
        """One step of all envs: hiddens ``[N, n, H]``. Returns actions ``[N, n]``, log-probs,
        values ``[N, n]`` and the new hiddens."""
        N, n = obs.shape[:2]
        (ao, aid), (cs, cid) = self.inputs(state, obs, Z, z)
        logits, ha = self.actor.step(ao.reshape(N * n, -1), [i.reshape(-1) for i in aid], h_actor.reshape(N * n, -1))
        value, hc = self.critic.step(cs.reshape(N * n, -1), [i.reshape(-1) for i in cid], h_critic.reshape(N * n, -1))
        logp = logits.log_softmax(-1)
        a = logp.argmax(-1) if deterministic else torch.multinomial(logp.exp(), 1).squeeze(1)
        return (a.view(N, n), logp.gather(1, a.unsqueeze(1)).view(N, n), value.view(N, n),
                ha.view(N, n, -1), hc.view(N, n, -1))

    @torch.no_grad()
    def value(self, state, obs, Z, z, h_critic):
        """Critic value ``[N, n]`` of an observation given the current hidden (not advanced)."""
        N, n = obs.shape[:2]
        _, (cs, cid) = self.inputs(state, obs, Z, z)
        v, _ = self.critic.step(cs.reshape(N * n, -1), [i.reshape(-1) for i in cid], h_critic.reshape(N * n, -1))
        return v.view(N, n)

    def hiddens(self, state, obs, Z, z, h_actor, h_critic, reset):
        """No-grad pass over whole rollouts ``[T, B, ...]`` from their initial hiddens: the actor's and
        critic's hidden entering every step, ``[T, B, n, H]`` each (the chunks' initial states)."""
        T, B, n = obs.shape[:3]
        (ao, aid), (cs, cid) = self.inputs(state, obs, Z, z)
        r = reset.unsqueeze(-1).expand(T, B, n).reshape(T, B * n)
        ha = self.actor.hiddens(ao.reshape(T, B * n, -1), [i.reshape(T, B * n) for i in aid],
                                h_actor.reshape(B * n, -1), r)
        hc = self.critic.hiddens(cs.reshape(T, B * n, -1), [i.reshape(T, B * n) for i in cid],
                                 h_critic.reshape(B * n, -1), r)
        return ha.view(T, B, n, -1), hc.view(T, B, n, -1)

    def evaluate(self, state, obs, Z, z, action, h_actor, h_critic, reset):
        """Recurrent pass with gradients over sequences ``[L, B, ...]`` (rollouts or chunks) from the
        hiddens entering their first step ``[B, n, H]``: log-probs, entropies, values ``[L, B, n]``."""
        T, B, n = obs.shape[:3]
        (ao, aid), (cs, cid) = self.inputs(state, obs, Z, z)
        r = reset.unsqueeze(-1).expand(T, B, n).reshape(T, B * n)
        logits = self.actor.sequence(ao.reshape(T, B * n, -1), [i.reshape(T, B * n) for i in aid],
                                     h_actor.reshape(B * n, -1), r).view(T, B, n, -1)
        value = self.critic.sequence(cs.reshape(T, B * n, -1), [i.reshape(T, B * n) for i in cid],
                                     h_critic.reshape(B * n, -1), r).view(T, B, n)
        logp_all = layouts.log_softmax(logits)
        logp = logp_all.gather(-1, action.unsqueeze(-1)).squeeze(-1)
        ent = -(logp_all.exp() * logp_all).sum(-1)
        return logp, ent, value


class Discriminators(nn.Module):
    """``q_D(Z | s)`` and ``q_d(z_i | o_i, Z)`` (shared over agents, with an agent-id embedding)."""

    def __init__(self, state_dim: int, obs_dim: int, n_agents: int, cfg: HMASDConfig):
        super().__init__()
        H = cfg.hidden
        self.team = nn.Sequential(nn.LayerNorm(state_dim), nn.Linear(state_dim, H), nn.ReLU(),
                                  nn.Linear(H, H), nn.ReLU(), Float32Linear(H, cfg.n_team_skills))
        keep = torch.ones(obs_dim, dtype=torch.bool)
        for start, end in cfg.disc_ignore:
            if end > obs_dim:
                raise ValueError(f"hmasd.disc_ignore range [{start}, {end}) is past the observation's "
                                 f"{obs_dim} features")
            keep[start:end] = False
        if not keep.any():
            raise ValueError("hmasd.disc_ignore hides every observation feature from q_d")
        # Indices, not a 0/1 mask: a masked feature would still be a constant input to LayerNorm.
        self.register_buffer("agent_keep", keep.nonzero().squeeze(-1), persistent=False)
        self.agent_in = nn.Sequential(nn.LayerNorm(len(self.agent_keep)), nn.Linear(len(self.agent_keep), H))
        self.agent_Z = nn.Embedding(cfg.n_team_skills, H)
        self.agent_id = nn.Embedding(n_agents, H)
        self.agent_out = nn.Sequential(nn.ReLU(), nn.Linear(H, H), nn.ReLU(), Float32Linear(H, cfg.n_agent_skills))
        self.register_buffer("agent_ids", torch.arange(n_agents), persistent=False)

    def log_q_team(self, state: torch.Tensor) -> torch.Tensor:
        """``log q_D(. | s)``: state ``[..., S]`` -> ``[..., n_Z]``."""
        return layouts.log_softmax(self.team(state))

    def log_q_agent(self, obs: torch.Tensor, Z: torch.Tensor) -> torch.Tensor:
        """``log q_d(. | o_i, Z)``: obs ``[..., n, O]``, Z ``[...]`` -> ``[..., n, n_z]`` (only the
        features outside ``disc_ignore`` are read)."""
        if len(self.agent_keep) < obs.shape[-1]:
            obs = obs.index_select(-1, self.agent_keep)
        h = self.agent_in(obs) + self.agent_Z(Z).unsqueeze(-2) + self.agent_id(self.agent_ids)
        return layouts.log_softmax(self.agent_out(h))


class HMASDPolicy(nn.Module):
    """Every HMASD network and normaliser: what the workers receive as one policy version."""

    def __init__(self, state_dim: int, obs_dim: int, n_agents: int, n_actions: int, cfg: HMASDConfig):
        super().__init__()
        self.cfg, self.n_agents, self.n_actions = cfg, n_agents, n_actions
        self.hierarchy = cfg.hierarchy
        self.low = SkillDiscoverer(state_dim, obs_dim, n_agents, n_actions, cfg)
        self.low_norm = ValueNorm()
        if self.hierarchy:
            self.coordinator = SkillCoordinator(state_dim, obs_dim, n_agents, cfg.n_team_skills, cfg.n_agent_skills,
                                                cfg.coord_dim, cfg.coord_heads, cfg.coord_layers)
            self.high_norm = ValueNorm()
            self.disc = Discriminators(state_dim, obs_dim, n_agents, cfg)
        # Only with the bonus on: the paper's policies (and their checkpoints) stay as they were.
        self.novelty = (RandomNetworkDistillation(obs_dim, cfg.hidden, cfg.novelty_norm) if cfg.novelty_coef > 0
                        else None)

    def param_groups(self) -> dict[str, list[nn.Parameter]]:
        """Parameters by network, for separate gradient clipping."""
        groups = {"actor": list(self.low.actor.parameters()), "critic": list(self.low.critic.parameters())}
        if self.hierarchy:
            groups.update(coordinator=list(self.coordinator.parameters()), disc=list(self.disc.parameters()))
        if self.novelty is not None:
            groups["novelty"] = list(self.novelty.predictor.parameters())
        return groups
