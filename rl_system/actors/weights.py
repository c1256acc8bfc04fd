"""A policy's weights on their way from the learner to the workers: :class:`PolicyWeights`."""

from __future__ import annotations

from typing import Any

import torch

from rl_system.checkpoint.writer import PackedTensor


class PolicyWeights(dict):
    """A state dict (``{name: CPU tensor}``) that pickles its tensors as NumPy arrays
    (:class:`~rl_system.checkpoint.writer.PackedTensor`).

    Every round the learner returns the weights and every worker loads them, so their pickling is
    on the round's critical path. PyTorch pickles a tensor through its storage, at a fixed cost per
    tensor each way, where Ray moves a NumPy array as one out-of-band buffer (docs/lab/results.md,
    2026-12-02). Unpickled it is a ``PolicyWeights`` of fresh, writable tensors again, so whoever
    holds it, in the learner's process or after the trip, holds plain tensors by name."""

    def __reduce__(self) -> tuple[Any, ...]:
        packed = {k: PackedTensor(v) if isinstance(v, torch.Tensor) else v for k, v in self.items()}
        return (_unpack, (packed,))


def _unpack(packed: dict[str, Any]) -> PolicyWeights:
    return PolicyWeights({k: v.to_tensor(copy=True) if isinstance(v, PackedTensor) else v for k, v in packed.items()})
