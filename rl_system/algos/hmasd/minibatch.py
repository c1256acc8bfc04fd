"""How an HMASD update draws its minibatches: the low level's samples cut into chunks of
``chunk_len`` steps for BPTT (MAPPO-style), and per epoch a random set of chunks plus a random share
of the skill windows per minibatch, drawn over a learner group's whole batch."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch

from rl_system import collective


def to_chunks(x: torch.Tensor, L: int) -> torch.Tensor:
    """``[T, N, ...]`` -> ``[L, (T // L) * N, ...]``: chunk ``c = k * N + e`` holds steps
    ``k*L .. k*L+L-1`` of env ``e``."""
    T, N = x.shape[:2]
    return x.reshape(T // L, L, N, *x.shape[2:]).transpose(0, 1).reshape(L, (T // L) * N, *x.shape[2:])


def chunk_len(T: int, want: int) -> int:
    """The largest divisor of ``T`` not above ``want``."""
    return max(d for d in range(1, min(want, T) + 1) if T % d == 0)


@dataclass
class MinibatchPlan:
    """The samples an update's epochs draw minibatches from: ``low`` chunked ``[L, C, ...]`` (the
    hiddens ``[C, ...]``), ``high`` per window, ``C`` chunks and ``W`` windows over the group,
    ``M`` minibatches per epoch, ``to_local`` the group's global-to-local row maps (None alone)."""

    low: dict[str, torch.Tensor]
    high: dict[str, torch.Tensor]
    L: int
    C: int
    W: int
    M: int
    to_local: tuple[torch.Tensor, torch.Tensor] | None

    def minibatches(self) -> Iterator[tuple[torch.Tensor | None, torch.Tensor | None, tuple[int, int]]]:
        """One epoch: ``(chunk rows, window rows, (chunks, windows) in the global minibatch)``
        for each of ``M`` minibatches; the permutations are drawn over the group's whole batch,
        the same on every learner, which then keeps its own rows. Rows ``None``: all of them, in
        order (one minibatch on one learner)."""
        device = self.low["reset"].device
        C, W, M = self.C, self.W, self.M
        if M == 1 and self.to_local is None:
            # The whole batch in its own order: the columns themselves, not a copy of every
            # column gathered each epoch (bit for bit the same update; the preset's is faster).
            yield None, None, (C, W)
            return
        chunks = torch.randperm(C, device=device).tensor_split(M) if M > 1 else [torch.arange(C, device=device)]
        windows = torch.randperm(W, device=device).tensor_split(M) if M > 1 else [torch.arange(W, device=device)]
        for ci, wi in zip(chunks, windows):
            rows = (ci.numel(), wi.numel())
            if self.to_local is not None:
                ci, wi = collective.take_local(self.to_local[0], ci), collective.take_local(self.to_local[1], wi)
            yield ci, wi, rows


def take_rows(data: dict[str, torch.Tensor], idx: torch.Tensor | None, env_major: tuple[str, ...] = ()) -> dict:
    """Rows ``idx`` of a minibatch source: dim 1 of chunked ``[L, C, ...]`` columns, dim 0 of the
    others (window samples, chunk hiddens); everything when ``idx`` is None."""
    if idx is None:
        return data
    return {k: v.index_select(0 if (k in env_major or not env_major) else 1, idx) for k, v in data.items()}
