"""Activations for the update's hot path.

PyTorch's CPU ``tanh`` kernel is not vectorised like its ``sigmoid``: on a 2-core AMD EPYC VM
(torch 2.13, AVX-512) ``torch.tanh`` of a ``[512, 64]`` float32 tensor takes 78 µs and
``torch.sigmoid`` 8.7 µs. :class:`Tanh` computes ``tanh(x) = 2·sigmoid(2x) − 1`` (exact in real
arithmetic; in float32 within 1.8e-7 of ``torch.tanh`` everywhere) on large CPU tensors, in place
where it can, with ``tanh``'s own backward (``grad · (1 − y²)``). Forward plus backward of a
``[4096, 64]`` tensor: 358 µs instead of 770 µs; ``[512, 64]``: 61 µs instead of 105 µs
(``python -m bench.bench_kernels``; the updates this speeds up: ``python -m bench.bench_update``). Small tensors (a sampler's step) and GPU tensors keep
``torch.tanh``, which is as fast or faster there.
"""

from __future__ import annotations

import torch
from torch import nn

FAST_MIN_NUMEL = 16_384
"""Below this many elements ``torch.tanh`` is as fast (the custom backward's Python call costs
~5 µs)."""


class _SigmoidTanh(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:  # noqa: ANN001 - autograd's signature
        y = sigmoid_tanh(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:  # noqa: ANN001
        (y,) = ctx.saved_tensors
        return torch.ops.aten.tanh_backward(grad, y)


def sigmoid_tanh(x: torch.Tensor) -> torch.Tensor:
    """``tanh(x)`` as ``2·sigmoid(2x) − 1``, one new tensor (the other steps in place)."""
    return torch.sigmoid(x * 2).mul_(2).sub_(1)


class Tanh(nn.Module):
    """``nn.Tanh`` with the fast CPU path above for large tensors; same parameters (none), same
    state dict, so checkpoints and exported graphs are unaffected."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.device.type != "cpu" or x.numel() < FAST_MIN_NUMEL:
            return torch.tanh(x)
        if torch.is_grad_enabled() and x.requires_grad:
            return _SigmoidTanh.apply(x)
        return sigmoid_tanh(x)
