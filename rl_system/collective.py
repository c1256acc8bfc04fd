"""Collectives of a learner group, seen from one learner process.

A learner trains on its share of a round (a contiguous range of the round's envs) and every
quantity that is global for one learner stays global for N: the trainers and normalisers reduce
through the :class:`Collective` the learner hands its trainer when it builds it, so N learners
given one global batch take the same steps as one learner given all of it. It lives below both
the actors (which set groups up) and the algorithms (which reduce through them).

* :class:`Collective` (world size 1) is the single learner: every reduction is the identity and
  costs nothing, so the default path is the one-learner code, unchanged in speed.
* :class:`ProcessGroup` wraps a ``torch.distributed`` group (gloo on CPU, NCCL on GPU) that
  :mod:`rl_system.actors.learner_group` sets up through Ray.

A user's network with its own running statistics makes them global the same way: its
``observe(obs, group)`` receives the group, and ``group.all_reduce(t)`` sums ``t`` over it in place.
"""

from __future__ import annotations

from datetime import timedelta

import torch
import torch.distributed as dist


class Collective:
    """The one-learner group: rank 0 of 1."""

    rank = 0
    world = 1

    def all_reduce(self, tensor: torch.Tensor, op: str = "sum") -> torch.Tensor:
        """Reduce ``tensor`` over the group in place (``op``: ``sum`` or ``max``); returns it."""
        return tensor

    def all_gather(self, tensor: torch.Tensor) -> torch.Tensor:
        """Every rank's ``tensor [*S]`` (same shape on all) stacked in rank order: ``[world, *S]``."""
        out = tensor.new_zeros((self.world, *tensor.shape))
        out[self.rank] = tensor
        return self.all_reduce(out)

    def all_gather_ints(self, value: int) -> list[int]:
        """Every rank's ``value``, in rank order."""
        return [value] if self.world == 1 else self.all_gather(torch.tensor(value, device=self.device)).tolist()

    device = torch.device("cpu")
    """Where this group's collectives take their tensors (NCCL: the GPU)."""

    def mean(self, x: torch.Tensor) -> torch.Tensor:
        """Mean of all elements of ``x`` over the group (0-dim, ``x``'s dtype; NaN if none)."""
        if self.world == 1:
            return x.mean()
        both = torch.stack([x.sum().double(), torch.tensor(float(x.numel()), dtype=torch.float64, device=x.device)])
        total, count = self.all_reduce(both).tolist()
        return torch.tensor(total / count if count else float("nan"), dtype=x.dtype, device=x.device)

    # -- built on the two primitives -----------------------------------------------------------
    def moments(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(count, mean, biased variance)`` over the group of the rows of ``x [B, *F]`` (float64;
        mean and variance ``[*F]``). Two passes: the mean first, then the squared deviations from
        it, so large offsets do not cancel."""
        x = x.detach().to(torch.float64)
        if self.world == 1:
            return (torch.tensor(float(x.shape[0]), dtype=torch.float64, device=x.device),
                    x.mean(0), x.var(0, unbiased=False))
        head = torch.cat([torch.tensor([float(x.shape[0])], dtype=torch.float64, device=x.device),
                          x.sum(0).reshape(-1)])
        self.all_reduce(head)
        count = head[0]
        mean = (head[1:] / count.clamp(min=1)).reshape(x.shape[1:])
        sq = (x - mean).square().sum(0)
        self.all_reduce(sq)
        return count, mean, sq / count.clamp(min=1)

    def mean_std(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean and unbiased standard deviation of all elements of ``x`` over the group, in
        ``x``'s dtype (what ``x.mean()`` and ``x.std()`` give for one learner)."""
        if self.world == 1:
            return x.mean(), x.std()
        count, mean, var = self.moments(x.reshape(-1, 1))
        std = (var * count / (count - 1).clamp(min=1)).sqrt()
        return mean.reshape(()).to(x.dtype), std.reshape(()).to(x.dtype)

    def explained_variance(self, pred: torch.Tensor, target: torch.Tensor) -> float:
        """``1 - Var(target - pred) / Var(target)`` over the group; NaN when the target is constant."""
        if self.world == 1:
            var = target.var()
            return float("nan") if var == 0 else float(1 - (target - pred).var() / var)
        _, _, var = self.moments(target.reshape(-1, 1))
        _, _, var_err = self.moments((target - pred).reshape(-1, 1))
        return float("nan") if float(var) == 0 else float(1 - var_err / var)


SOLO = Collective()
"""The one-learner group (what a trainer built outside a learner group reduces through)."""


class ProcessGroup(Collective):
    """Rank ``rank`` of a ``torch.distributed`` group of ``world`` learners."""

    def __init__(self, rank: int, world: int, address: str, backend: str, timeout_s: float):
        dist.init_process_group(backend, init_method=address, rank=rank, world_size=world,
                                timeout=timedelta(seconds=timeout_s))
        self.rank, self.world, self.backend = rank, world, backend
        # NCCL reduces only device tensors (the learners' own GPU); gloo host ones.
        self.device = torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" else torch.device("cpu")

    def all_reduce(self, tensor: torch.Tensor, op: str = "sum") -> torch.Tensor:
        dist.all_reduce(tensor, op=dist.ReduceOp.MAX if op == "max" else dist.ReduceOp.SUM)
        return tensor


class Shard:
    """Where this learner's envs sit in the round's global batch: the learners hold contiguous
    env ranges, in rank order (the round's rollouts in worker order, split by rank)."""

    def __init__(self, T: int, local_envs: int, offset: int, global_envs: int):
        self.T, self.local_envs, self.offset, self.global_envs = T, local_envs, offset, global_envs

    @classmethod
    def of(cls, step_shape: tuple[int, ...], group: Collective) -> Shard:
        """From a step column's ``[T, N_local]`` shape and every learner's env count."""
        T, n = step_shape[0], step_shape[1]
        counts = group.all_gather_ints(n)
        return cls(T, n, sum(counts[:group.rank]), sum(counts))

    def localize(self, perm: torch.Tensor, recurrent: bool):
        """The local rows of a permutation of the global rows (steps ``t * N + env``, or envs
        where ``recurrent``), in permutation order, and ``bounds(i)``: how many of them come
        before global position ``i``, so global minibatch ``[a, b)`` is local ``[bounds(a), bounds(b))``."""
        if self.local_envs == self.global_envs:
            return perm, lambda i: i
        rows = self.inverse(perm.device, per_env=recurrent)[perm]
        mine = rows >= 0
        before = torch.cat([mine.new_zeros(1, dtype=torch.int64), mine.cumsum(0)]).tolist()
        return rows[mine], lambda i: before[i]

    def inverse(self, device: torch.device, per_env: bool = False) -> torch.Tensor:
        """The local row of each global row (``[T * global_envs]`` steps ``t * N + env``, or
        ``[global_envs]`` envs where ``per_env``; -1: another learner's), for :func:`take_local`."""
        T = 1 if per_env else self.T
        t = torch.arange(T, device=device).repeat_interleave(self.local_envs)
        env = torch.arange(self.local_envs, device=device).repeat(T)
        return inverse(t * self.global_envs + self.offset + env, T * self.global_envs)


def inverse(global_ids: torch.Tensor, size: int) -> torch.Tensor:
    """``[size]``: for each global index, the local row holding it (``global_ids[row]``), or -1."""
    out = torch.full((size,), -1, dtype=torch.int64, device=global_ids.device)
    out[global_ids] = torch.arange(global_ids.numel(), device=global_ids.device)
    return out


def take_local(to_local: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """The local rows of global indices ``ids`` held here, in ``ids``' order."""
    rows = to_local[ids]
    return rows[rows >= 0]


def window_ids(start: torch.Tensor, group: Collective) -> tuple[torch.Tensor, int]:
    """Where this learner's skill windows sit among the group's. ``start [T, N_local]`` marks the
    windows; they are numbered in (t, env) order over the group's envs (rank order), as one
    learner holding every env would flatten them. Returns ``(global index [W_local], W_global)``."""
    per_t = start.sum(1)  # [T]
    if group.world == 1:
        return torch.arange(int(per_t.sum()), device=start.device), int(per_t.sum())
    every = group.all_gather(per_t)  # [world, T]
    total = every.sum(0)
    before_t = total.cumsum(0) - total  # windows of all learners at earlier steps
    before_me = every[:group.rank].sum(0)  # windows of lower ranks at the same step
    first_local = per_t.cumsum(0) - per_t
    t_idx = start.nonzero()[:, 0]
    local = torch.arange(t_idx.numel(), device=start.device)
    return before_t[t_idx] + before_me[t_idx] + local - first_local[t_idx], int(total.sum())


class Means:
    """Scalar metrics as means over a learner group, reduced in one collective."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.parts: list[torch.Tensor] = []

    def add(self, name: str, x: torch.Tensor) -> None:
        self.names.append(name)
        self.parts += [x.detach().sum().double(), torch.tensor(float(x.numel()), dtype=torch.float64,
                                                               device=x.device)]

    def reduce(self, group: Collective) -> dict[str, float]:
        """``{name: mean}`` (NaN where no learner had an element)."""
        if not self.names:
            return {}
        flat = group.all_reduce(torch.stack(self.parts)).tolist()
        return {n: flat[2 * i] / flat[2 * i + 1] if flat[2 * i + 1] else float("nan") for i, n in enumerate(self.names)}


def flat_grads(params: list[torch.nn.Parameter]) -> torch.Tensor:
    """All gradients in one flat buffer (zeros where a parameter has none): one all-reduce per step."""
    return torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in params])


def set_grads(params: list[torch.nn.Parameter], flat: torch.Tensor) -> None:
    """Write ``flat`` (from :func:`flat_grads`) back into the parameters' gradients."""
    offset = 0
    for p in params:
        n = p.numel()
        p.grad = flat[offset:offset + n].view_as(p).clone() if p.grad is None else p.grad.copy_(
            flat[offset:offset + n].view_as(p))
        offset += n
