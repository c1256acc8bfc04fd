"""Activations for the update's hot path.

PyTorch's x86 wheels compute ``torch.tanh`` on the CPU with MKL's vector math (VML), which runs
its vectorised code only on Intel CPUs; elsewhere it takes a generic path, many times slower than
``torch.sigmoid`` of the same tensor, while on Intel CPUs ``torch.tanh`` is the faster of the two
(docs/ppo.md, "Speed of the update"; docs/lab/results.md, 2026-12-01 and 2026-12-03; ``python -m
bench.bench_kernels``).

Where the generic path runs (:data:`SIGMOID_TANH`), :class:`Tanh` computes
``tanh(x) = 2·sigmoid(2x) − 1`` (exact in real arithmetic; in float32 within 2e-7 of
``torch.tanh`` everywhere, which tests/bench/test_bench_kernels.py holds it to) on large CPU tensors, in
place where it can, with ``tanh``'s own backward (``grad · (1 − y²)``), which beats the generic
``torch.tanh``'s forward plus backward. On an Intel CPU that form is the slower one, so there
:class:`Tanh` is ``torch.tanh``. Small tensors (a sampler's step) and GPU tensors always take
``torch.tanh``. The choice is made once from the CPU's vendor, not by timing, so a seed repeats
bit for bit on the same machine.
"""

from __future__ import annotations

import platform

import torch
from torch import nn

FAST_MIN_NUMEL = 16_384
"""Below this many elements ``torch.tanh`` is as fast: the custom backward's Python call costs
about what the sigmoid form saves (docs/lab/results.md, 2026-12-01)."""


def mkl_tanh_is_generic() -> bool:
    """Whether ``torch.tanh`` on this CPU runs MKL VML's generic (unvectorised) code: PyTorch
    built with MKL on an x86 CPU whose vendor is not Intel."""
    if not torch.backends.mkl.is_available() or platform.machine().lower() not in ("x86_64", "amd64", "i686", "x86"):
        return False
    return cpu_vendor() not in ("GenuineIntel", "")  # unknown: assume the vendor MKL serves


def cpu_vendor() -> str:
    """The x86 vendor string (``GenuineIntel``, ``AuthenticAMD``, ...), or "" where unknown."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("vendor_id"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    text = platform.processor()  # Windows: "AMD64 Family 25 Model 1 Stepping 1, AuthenticAMD"
    return next((v for v in ("GenuineIntel", "AuthenticAMD", "HygonGenuine") if v in text), "")


SIGMOID_TANH: bool = mkl_tanh_is_generic()
"""Whether :class:`Tanh` takes the sigmoid form on large CPU tensors (module text)."""


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
    """``nn.Tanh`` with the sigmoid form above for large tensors on CPUs where ``torch.tanh`` is
    slow; same parameters (none), same state dict, so checkpoints and exported graphs are
    unaffected."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not takes_sigmoid_form(x):
            return torch.tanh(x)
        if torch.is_grad_enabled() and x.requires_grad:
            return _SigmoidTanh.apply(x)
        return sigmoid_tanh(x)


def takes_sigmoid_form(x: torch.Tensor) -> bool:
    """Whether :class:`Tanh` computes ``tanh(x)`` in the sigmoid form (a large CPU tensor where
    ``torch.tanh`` runs MKL's generic code), not with ``torch.tanh``."""
    return SIGMOID_TANH and x.device.type == "cpu" and x.numel() >= FAST_MIN_NUMEL


def inplace_activation(module: nn.Module):
    """For a no-grad forward on a fresh tensor: an in-place callable equal to ``module``'s forward
    (``tanh_``, ``relu_``, ``elu_``), or None for an activation this does not know."""
    if type(module) is Tanh:
        return lambda x: sigmoid_tanh(x) if takes_sigmoid_form(x) else x.tanh_()
    if type(module) in (nn.Tanh, nn.ReLU):
        return torch.Tensor.tanh_ if type(module) is nn.Tanh else torch.Tensor.relu_
    if type(module) is nn.ELU:
        alpha = module.alpha
        return lambda x: nn.functional.elu_(x, alpha)
    return None
