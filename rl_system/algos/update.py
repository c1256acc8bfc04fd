"""The update every algorithm runs: epochs of minibatch steps on one round's prepared batch.

An algorithm is its preparation (GAE, V-trace, the hierarchy's returns: what the epochs train on)
and its loss. Everything between the two is written here once:

* :meth:`UpdateCore.set_lr` -- the learning rate for the share of the step budget used (linear
  annealing where configured), times ``lr_scale`` (a rollback on collapse lowers it);
* :class:`Minibatches` -- the epochs of a flat batch (rows are steps) or of sequences (rows are
  env sequences, for BPTT): each epoch a permutation of the learner group's rows cut into
  minibatches, every learner keeping its own rows of each;
* :meth:`UpdateCore.step` -- one gradient step: the loss writes its gradients, the group
  all-reduces gradients and statistics in one call, the statistics become minibatch means, the
  gradients are clipped per parameter group, a step with a non-finite statistic or norm is
  dropped (a NaN would poison the weights and Adam's moments), and the optimiser steps;
* :meth:`UpdateCore.run_epochs` -- the epoch loop: statistics summed per name over the steps that
  reported them, dropped steps counted, an early stop once a step's KL passes ``target_kl``.

A learner group (:mod:`rl_system.collective`) is handed to the core when the trainer is built; a
loss written for one learner (its sums divided by the global minibatch's rows) then takes the
one-learner steps on N learners, because every reduction above runs over the group.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import torch
from torch import nn

from rl_system import collective
from rl_system.algos import LR, MINIBATCH_STEPS, SKIPPED_MINIBATCHES

M = TypeVar("M")

Gradients = Callable[[], torch.Tensor]
"""Writes this learner's gradients of one minibatch's loss into the parameters and returns its
statistics ``[len(names)]`` (no grad): sums over its rows, or its shares of the means."""


@dataclass
class EpochStats:
    """What :meth:`UpdateCore.run_epochs` did: statistic sums and how many steps reported each,
    the steps taken and the steps dropped (not finite)."""

    sums: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    steps: int = 0
    skipped: int = 0

    def add(self, stats: dict[str, float]) -> None:
        for k, v in stats.items():
            self.sums[k] = self.sums.get(k, 0.0) + v
            self.counts[k] = self.counts.get(k, 0) + 1
        self.steps += 1

    def report(self, lr: float) -> dict[str, float]:
        """The metrics every trainer reports: the update's learning rate, steps taken and dropped."""
        return {LR: lr, MINIBATCH_STEPS: self.steps, SKIPPED_MINIBATCHES: self.skipped}

    def means(self, names: Iterable[str] = ()) -> dict[str, float]:
        """Each statistic's mean over the steps that reported it; ``names`` that no step reported: 0."""
        out = dict.fromkeys(names, 0.0)
        out.update({k: v / self.counts[k] for k, v in self.sums.items()})
        return out


class UpdateCore:
    """The optimiser's side of an update, shared by every algorithm.

    ``params``: the policy's parameters in a fixed order (the group reduces their gradients as one
    flat buffer); ``clip_groups``: the sets whose gradient norms are clipped each on its own to
    ``max_grad_norm`` (default: all of ``params`` together); ``group``: the learner group."""

    def __init__(self, optimizer: Any, params: Sequence[nn.Parameter], *, lr: float, anneal_lr: bool,
                 max_grad_norm: float, clip_groups: Sequence[Sequence[nn.Parameter]] | None = None,
                 group: collective.Collective = collective.SOLO):
        self.optimizer = optimizer
        self.params = list(params)
        self.clip_groups = [list(g) for g in clip_groups] if clip_groups is not None else [self.params]
        self.lr, self.anneal_lr, self.max_grad_norm = lr, anneal_lr, max_grad_norm
        self.group = group
        self.lr_scale = 1.0
        self.skipped_updates = 0
        """Minibatch steps dropped so far for a non-finite loss or gradient (a run-wide count)."""

    def set_lr(self, progress: float) -> float:
        """The learning rate for ``progress`` in [0, 1] (the share of the step budget used), set on
        every parameter group of the optimiser; returns it."""
        lr = (self.lr * max(1.0 - progress, 0.0) if self.anneal_lr else self.lr) * self.lr_scale
        for g in self.optimizer.param_groups:
            g["lr"] = lr
        return lr

    def zero_grad(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)

    def backward(self, loss_fn: Callable[[], tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
        """A :data:`Gradients` by autograd: zeroes the gradients, backpropagates ``loss_fn()``'s
        ``(loss, statistics)`` and returns the statistics."""
        self.zero_grad()
        loss, stats = loss_fn()
        loss.backward()
        return stats

    def step(self, gradients: Gradients, names: Sequence[str], rows: int = 1,
             clip: Callable[[], list[torch.Tensor]] | None = None,
             after_reduce: Callable[[], None] | None = None) -> dict[str, float] | None:
        """One optimiser step on one minibatch; returns its statistics ``{name: value / rows}``,
        or None (weights and moments untouched) where a statistic or a gradient norm is not finite.

        ``clip``: clips the gradients and returns their norms (default: each clip group to
        ``max_grad_norm``); ``after_reduce``: runs once the group's gradients are in place (a network
        that had no rows anywhere in the group drops its gradient there)."""
        values = gradients()
        group = self.group
        if group.world > 1:
            flat = group.all_reduce(torch.cat([collective.flat_grads(self.params), values]))
            collective.set_grads(self.params, flat[:-len(names)])
            values = flat[-len(names):]
        if after_reduce is not None:
            after_reduce()
        if rows != 1:
            values = values / rows
        stats = dict(zip(names, values.tolist()))
        norms = clip() if clip is not None else self.clip_norms()
        if not (all(math.isfinite(v) for v in stats.values()) and all(math.isfinite(n) for n in norms)):
            self.zero_grad()
            return None
        self.optimizer.step()
        return stats

    def clip_norms(self) -> list[torch.Tensor]:
        """Clips each clip group's gradients to ``max_grad_norm``; their norms before clipping."""
        return [nn.utils.clip_grad_norm_(g, self.max_grad_norm, foreach=True) for g in self.clip_groups]

    def run_epochs(self, num_epochs: int, minibatches: Callable[[], Iterable[M]],
                   step: Callable[[M], dict[str, float] | None], target_kl: float | None = None,
                   kl_name: str = "approx_kl") -> EpochStats:
        """``num_epochs`` passes of ``step`` over ``minibatches()`` (called once per epoch: each
        epoch draws its own permutation). With ``target_kl``, the update stops after the first step
        whose statistic ``kl_name`` exceeds it."""
        out = EpochStats()
        for _ in range(num_epochs):
            for mb in minibatches():
                stats = step(mb)
                if stats is None:
                    out.skipped += 1
                    continue
                out.add(stats)
                if target_kl is not None and stats[kl_name] > target_kl:
                    self.skipped_updates += out.skipped
                    return out
        self.skipped_updates += out.skipped
        return out


class Trainer:
    """Base of the trainers built on an :class:`UpdateCore` (``self.core``): the
    :class:`~rl_system.algos.protocols.Trainer` attributes that the learner reads and sets."""

    core: UpdateCore

    @property
    def group(self) -> collective.Collective:
        """The learner group this trainer reduces over."""
        return self.core.group

    @property
    def params(self) -> list[nn.Parameter]:
        """The policy's parameters, in the order the group reduces their gradients."""
        return self.core.params

    @property
    def skipped_updates(self) -> int:
        return self.core.skipped_updates

    @skipped_updates.setter
    def skipped_updates(self, value: int) -> None:
        self.core.skipped_updates = value

    @property
    def lr_scale(self) -> float:
        return self.core.lr_scale

    @lr_scale.setter
    def lr_scale(self, value: float) -> None:
        self.core.lr_scale = value


@dataclass
class Epoch:
    """One epoch's minibatches of a :class:`Minibatches` source: ``shuffled``, this learner's rows in
    the epoch's order; ``spans[i]``, minibatch ``i``'s local rows of it; ``sizes[i]``, its rows
    over the group."""

    shuffled: dict[str, torch.Tensor]
    spans: list[tuple[int, int]]
    sizes: list[int]
    source: Minibatches

    def __iter__(self) -> Iterator[tuple[dict[str, torch.Tensor], int, int]]:
        """``(minibatch, its index, its rows over the group)``; the minibatch's columns are views,
        one split per column and epoch (the spans are consecutive)."""
        cuts = [hi for _, hi in self.spans[:-1]]
        chunks = {k: torch.tensor_split(v, cuts, dim=self.source.row_dim(k)) for k, v in self.shuffled.items()}
        for i, size in enumerate(self.sizes):
            yield {k: c[i] for k, c in chunks.items()}, i, size


class Minibatches:
    """Epochs over a prepared batch, flat or by sequence.

    Flat (``sequences=False``): every column is ``[R, ...]`` with ``R = T * N`` step rows (global
    row ``t * N_global + env``). By sequence: columns are ``[T, N, ...]`` and a row is an env's
    whole sequence (dim 1), except the ``env_major`` columns ``[N, ...]`` (e.g. initial recurrent
    states), whose rows are dim 0. Each epoch draws a permutation of the group's rows (the same on
    every learner: same seed, same RNG use), keeps this learner's rows in that order (one gather
    per column) and cuts it into ``ceil(R / num_minibatches)``-row minibatches."""

    def __init__(self, data: dict[str, torch.Tensor], shard: collective.Shard, num_minibatches: int,
                 sequences: bool = False, env_major: Sequence[str] = ()):
        self.data, self.shard, self.sequences, self.env_major = data, shard, sequences, tuple(env_major)
        self.rows = shard.global_envs if sequences else shard.global_envs * shard.T
        self.size = math.ceil(self.rows / min(num_minibatches, self.rows))
        self.device = next(iter(data.values())).device

    def row_dim(self, name: str) -> int:
        """The dim of column ``name`` that holds its rows."""
        return 1 if self.sequences and name not in self.env_major else 0

    def take(self, name: str, x: torch.Tensor, idx: torch.Tensor | slice) -> torch.Tensor:
        """Rows ``idx`` of column ``name`` (along :meth:`row_dim`)."""
        return x[:, idx] if self.row_dim(name) else x[idx]

    def epoch(self) -> Epoch:
        """A fresh permutation of the group's rows, this learner's rows gathered in its order."""
        R, size = self.rows, self.size
        perm = torch.randperm(R, device=self.device)
        local, bounds = self.shard.localize(perm, self.sequences)
        shuffled = {k: self.take(k, v, local) for k, v in self.data.items()}
        starts = range(0, R, size)
        spans = [(bounds(a), bounds(min(a + size, R))) for a in starts]
        return Epoch(shuffled, spans, [min(a + size, R) - a for a in starts], self)
