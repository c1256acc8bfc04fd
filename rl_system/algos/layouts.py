"""Two shapes that PyTorch's CPU kernels run slowly, computed in a layout they run fast in.

* **A softmax over a few actions.** ATen's CPU ``log_softmax`` vectorises along the reduced dim,
  so a last dim shorter than one vector register (16 float32 under AVX-512) leaves most of each
  vector idle: on ``[4096, n]`` it is 2.7× (n = 2) to 9.5× (n = 15) slower than the same reduction
  over dim 0 of the transposed tensor, which is vectorised along the rows. :func:`log_softmax`
  takes that layout for such shapes where the two give the same bits, forward and backward: a
  whole number of vectors of rows (a tail row would take the scalar ``exp``) on an x86 CPU,
  checked under each of ATen's x86 kernels (AVX-512, AVX2 and the default build;
  ``tests/algos/test_layouts.py``). It hands its output and its input's gradient back in torch's
  row-major layout: handed back as transposed views they were equal too, but the bias gradient's
  sum over rows and the next matrix product then ran in another order and the update's bits
  differed (by 9e-8 after one CartPole update).
* **A weight gradient over a narrow input.** MKL's sgemm is slow when the row-major result is
  narrow and the reduction long: ``grad.T @ x`` for a first layer over 4 observation features
  (``[32, 4096] @ [4096, 4]``) runs at 7 GFLOP/s on one AMD EPYC core, while ``(x.T @ grad).T``,
  the same numbers in the other orientation, takes a sixth of the time (25 against 154 µs).
  :func:`weight_grad` picks the orientation by shape; the two differ in float32 rounding only
  (the sums of the long reduction run in another order).

Both apply to CPU tensors only (a GPU's kernels have neither problem) and are measured by
``python -m bench.bench_kernels`` (its layout table).
"""

from __future__ import annotations

import platform

import torch

MIN_ELEMENTS = 768
"""Below this many elements the transposed softmax's extra copy costs what it saves (1.7× at
``[256, 3]``, 1.06× at ``[256, 2]``)."""

MIN_ELEMENTS_GRAD = 1536
"""The same where autograd records it: its two extra nodes cost about 20 µs (1.07× at ``[768, 2]``,
0.89× at ``[512, 2]``, 1.15× at ``[512, 3]``)."""


def _vector_floats() -> int:
    """float32 lanes of ATen's CPU kernels here (0: not an x86 CPU, whose kernels were not checked)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return 0
    return 16 if torch.backends.cpu.get_cpu_capability() == "AVX512" else 8


VECTOR_FLOATS = _vector_floats()
"""ATen's softmax kernel vectorises a last dim this long; the transposed one gives its bits for
a multiple of this many rows."""

NARROW_INPUT = 32
"""A weight gradient whose input is narrower than this and than its output takes the other orientation."""


def transposes_softmax(x: torch.Tensor) -> bool:
    """Whether :func:`log_softmax` computes ``x``'s softmax over dim 0 of its transpose."""
    if x.device.type != "cpu" or x.dim() < 2 or not 0 < x.shape[-1] < VECTOR_FLOATS:
        return False
    rows = x.numel() // x.shape[-1]
    least = MIN_ELEMENTS_GRAD if x.requires_grad and torch.is_grad_enabled() else MIN_ELEMENTS
    return x.numel() >= least and rows % VECTOR_FLOATS == 0


def log_softmax(x: torch.Tensor) -> torch.Tensor:
    """``torch.log_softmax(x, dim=-1)``, bit for bit and in its layout, computed in the faster
    layout for a short last dim on the CPU (module text); differentiable, with a gradient that is
    also torch's, bit for bit and in its layout. ``x [..., n]`` → ``[..., n]``."""
    if not transposes_softmax(x):
        return torch.log_softmax(x, dim=-1)
    if x.requires_grad and torch.is_grad_enabled():
        return _TransposedLogSoftmax.apply(x)
    return _transposed(x)


def _transposed(x: torch.Tensor) -> torch.Tensor:
    """``log_softmax`` over dim 0 of ``x``'s transpose, handed back in ``x``'s own layout: the
    ops after it (a bias gradient's sum over rows, a matrix product) must see the layout they saw
    before, or they sum in another order and the bits differ."""
    return torch.log_softmax(x.movedim(-1, 0).contiguous(), dim=0).movedim(0, -1).contiguous()


class _TransposedLogSoftmax(torch.autograd.Function):
    """The transposed softmax with a backward that is torch's too: ``_log_softmax_backward_data``
    over dim 0 of the transposed gradient and output, the result handed back row-major (as
    torch's own backward gives it to the layer below)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:  # noqa: ANN001 - autograd's signature
        y_t = torch.log_softmax(x.movedim(-1, 0).contiguous(), dim=0)
        ctx.save_for_backward(y_t)
        return y_t.movedim(0, -1).contiguous()

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:  # noqa: ANN001
        (y_t,) = ctx.saved_tensors
        grad_t = torch.ops.aten._log_softmax_backward_data(grad.movedim(-1, 0).contiguous(), y_t, 0, y_t.dtype)
        return grad_t.movedim(0, -1).contiguous()


def weight_grad(grad: torch.Tensor, x: torch.Tensor, out: torch.Tensor) -> None:
    """Writes a linear layer's weight gradient ``grad.T @ x`` to ``out [n_out, n_in]`` from the
    gradient at its output ``grad [B, n_out]`` and its input ``x [B, n_in]``, in the orientation
    MKL runs fast for this shape (module text)."""
    n_out, n_in = out.shape
    if x.device.type == "cpu" and n_in < min(n_out, NARROW_INPUT):
        out.copy_(torch.mm(x.t(), grad).t())
    else:
        torch.mm(grad.t(), x, out=out)
