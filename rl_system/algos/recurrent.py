"""Recurrent cores and the masked unroll shared by recurrent PPO (:mod:`rl_system.algos.ppo`),
HMASD's GRU actor and critic (:mod:`rl_system.algos.hmasd.networks`) and recurrent MAPPO's
(:mod:`rl_system.algos.mappo.networks`).

A recurrent state travels as one flat tensor ``[B, S]`` per env (GRU: ``S = H``; LSTM: ``S = 2H``,
``h`` then ``c``; multi-agent: ``[B, n, S]``, a row per agent), so samplers, rollout columns and
checkpoints handle GRU and LSTM alike.

Episode boundaries inside a sequence are a ``reset[T, B]`` mask: where ``reset[t, b]`` the state
is zeroed before step ``t`` (an episode began there). Step 0 never resets: its state is the one
the sampler shipped with the rollout (already zeroed by the sampler where an episode began).
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

StepFn = Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


def episode_starts(done: torch.Tensor) -> torch.Tensor:
    """``reset[T, B]`` from ``done[T, B]``: an episode begins at ``t`` where one ended at ``t - 1``
    (never at ``t = 0``: the shipped initial state covers it)."""
    return torch.cat([torch.zeros_like(done[:1]), done[:-1]], dim=0)


def unroll(step: StepFn, x: torch.Tensor, state0: torch.Tensor, reset: torch.Tensor,
           entering: bool = False, hold: torch.Tensor | None = None) -> torch.Tensor:
    """Run ``step(x_t, state) -> (out_t, state)`` over ``x[T, B, F]`` from ``state0[B, S]``,
    zeroing the state where ``reset[T, B]``. Returns the outputs ``[T, B, ...]``, or with
    ``entering`` the state entering every step (before its reset) ``[T, B, S]``. Differentiable
    unless called under ``torch.no_grad``.

    The batch may have more dims (multi-agent: ``x[T, B, n, F]``, ``state0[B, n, S]``,
    ``reset[T, B, n]``). ``hold[T, B, ...]`` (as ``reset``): where set, step ``t`` leaves the state
    as it entered (after its reset): an agent no longer in its episode keeps its memory."""
    keep = (~reset).unsqueeze(-1).to(state0.dtype).unbind(0)
    holds = hold.unsqueeze(-1).unbind(0) if hold is not None else (None,) * len(keep)
    state, outs = state0, []
    # unbind, not x[t]: the backward of each x[t] is a zero tensor the size of all of x with one
    # step's gradient in it, summed T times (HMASD: a tenth of its update); unbind's stacks them.
    for x_t, keep_t, hold_t in zip(x.unbind(0), keep, holds):
        if entering:
            outs.append(state)
        state_in = state * keep_t
        out, state = step(x_t, state_in)
        if hold_t is not None:
            state = torch.where(hold_t, state_in, state)
        if not entering:
            outs.append(out)
    return torch.stack(outs)


class RecurrentCore(nn.Module):
    """A GRU or LSTM cell over feature rows with a flat state ``[B, S]``: ``step`` takes
    ``x[B, F]`` and returns ``(h[B, H], state[B, S])``; ``sequence`` unrolls ``x[T, B, F]``."""

    def __init__(self, kind: str, in_dim: int, hidden: int):
        super().__init__()
        if kind not in ("gru", "lstm"):
            raise ValueError(f"recurrent core must be 'gru' or 'lstm', got {kind!r}")
        self.kind, self.hidden = kind, hidden
        self.cell = nn.GRUCell(in_dim, hidden) if kind == "gru" else nn.LSTMCell(in_dim, hidden)
        self.state_size = hidden if kind == "gru" else 2 * hidden
        for name, p in self.cell.named_parameters():
            # Orthogonal recurrent weights and zero biases (CleanRL's LSTM agent, sb3-contrib).
            if name.startswith("weight"):
                nn.init.orthogonal_(p, 1.0)
            else:
                nn.init.zeros_(p)

    def initial_state(self, batch: int, device: torch.device | str = "cpu") -> torch.Tensor:
        return torch.zeros(batch, self.state_size, device=device)

    def step(self, x: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.kind == "gru":
            h = self.cell(x, state)
            return h, h
        h, c = self.cell(x, (state[:, :self.hidden], state[:, self.hidden:]))
        return h, torch.cat([h, c], dim=1)

    def sequence(self, x: torch.Tensor, state0: torch.Tensor, reset: torch.Tensor) -> torch.Tensor:
        """Outputs ``h[T, B, H]`` of an unroll over ``x[T, B, F]`` with resets ``[T, B]``."""
        return unroll(self.step, x, state0, reset)
