"""The faster layouts of :mod:`rl_system.algos.layouts` give the same numbers as PyTorch's own."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import textwrap

import pytest
import torch

from rl_system.algos import layouts


@pytest.mark.parametrize("shape", [(4096, 2), (1024, 3), (512, 6), (272, 7), (64, 8, 5), (2, 256, 7)])
def test_log_softmax_is_torchs_bit_for_bit_forward_and_backward(shape):
    torch.manual_seed(0)
    x = (torch.randn(shape) * 4).requires_grad_()
    x2 = x.detach().clone().requires_grad_()
    assert layouts.transposes_softmax(x)
    ours, theirs = layouts.log_softmax(x), torch.log_softmax(x2, dim=-1)
    assert ours.shape == theirs.shape and ours.stride() == theirs.stride()
    assert torch.equal(ours, theirs)
    grad = torch.randn(shape)
    ours.backward(grad)
    theirs.backward(grad)
    assert torch.equal(x.grad, x2.grad)


@pytest.mark.parametrize("shape", [(256, 2), (300, 2), (4096, 16), (4096, 64), (8,)])
def test_log_softmax_keeps_torchs_layout_where_it_is_fast(shape):
    x = torch.randn(shape)
    assert not layouts.transposes_softmax(x)
    out = layouts.log_softmax(x)
    assert out.is_contiguous()
    assert torch.equal(out, torch.log_softmax(x, dim=-1))


@pytest.mark.parametrize("n", [2, 3, 6])
def test_the_layer_below_gets_torchs_gradient_bit_for_bit(n):
    """In a network the ops after the softmax and the layer before it must see torch's layouts,
    or their sums run in another order (a bias gradient over rows, a matrix product)."""
    grads = []
    for fn in (layouts.log_softmax, lambda z: torch.log_softmax(z, dim=-1)):
        torch.manual_seed(0)
        layer, x, a = torch.nn.Linear(32, n), torch.randn(1024, 32), torch.randint(0, n, (1024, 1))
        logp = fn(layer(x))
        loss = -logp.gather(-1, a).sum() + (logp.exp() * logp).sum(-1).mean()
        loss.backward()
        grads.append((layer.weight.grad, layer.bias.grad, loss.detach()))
    assert all(torch.equal(ours, theirs) for ours, theirs in zip(*grads))


def test_autograd_raises_the_size_the_transposed_layout_takes():
    x = torch.randn(512, 2)
    assert layouts.transposes_softmax(x)
    assert not layouts.transposes_softmax(x.requires_grad_())
    with torch.no_grad():
        assert layouts.transposes_softmax(x)


def test_log_softmax_of_masked_logits_keeps_a_zero_probability():
    logits = torch.randn(512, 5)
    logits[:, 1] = torch.finfo(torch.float32).min
    probs = layouts.log_softmax(logits).exp()
    assert torch.all(probs[:, 1] == 0)
    assert torch.allclose(probs.sum(-1), torch.ones(512))


@pytest.mark.parametrize("n_out,n_in", [(32, 4), (64, 17), (32, 32), (2, 32), (6, 64)])
def test_weight_grad_is_grad_transposed_times_input(n_out, n_in):
    torch.manual_seed(1)
    grad, x = torch.randn(4096, n_out), torch.randn(4096, n_in)
    out = torch.full((n_out, n_in), float("nan"))
    layouts.weight_grad(grad, x, out)
    expected = grad.double().t() @ x.double()
    torch.testing.assert_close(out.double(), expected, rtol=1e-5, atol=1e-3)


def test_weight_grad_writes_into_a_view_of_a_flat_buffer():
    # the closed-form update's gradients are views of one buffer: the write must land there
    buffer = torch.zeros(32 * 4 + 8)
    view = buffer[8:].view(32, 4)
    grad, x = torch.randn(1024, 32), torch.randn(1024, 4)
    layouts.weight_grad(grad, x, view)
    assert torch.all(buffer[:8] == 0)
    torch.testing.assert_close(buffer[8:].view(32, 4), grad.t() @ x, rtol=1e-5, atol=1e-4)


_EVERY_SHORT_DIM = textwrap.dedent("""
    import torch
    from rl_system.algos import layouts
    checked = 0
    for rows in (256, 272, 768, 4096):
        for n in range(2, 16):
            torch.manual_seed(n)
            x = (torch.randn(rows, n) * 4).requires_grad_()
            x2 = x.detach().clone().requires_grad_()
            if not layouts.transposes_softmax(x):
                continue
            ours, theirs = layouts.log_softmax(x), torch.log_softmax(x2, dim=-1)
            grad = torch.randn(rows, n)
            ours.backward(grad)
            theirs.backward(grad)
            assert torch.equal(ours, theirs) and torch.equal(x.grad, x2.grad), (rows, n)
            checked += 1
    assert checked, "no shape took the transposed layout"
    print(torch.backends.cpu.get_cpu_capability(), layouts.VECTOR_FLOATS, checked)
""")


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="x86 kernels")
@pytest.mark.parametrize("capability", ["avx2", "default", None])
def test_log_softmax_is_bit_for_bit_under_each_x86_kernel(capability):
    """ATen picks its kernels by the CPU at start (``ATEN_CPU_CAPABILITY`` caps it): the layout's
    rule must give torch's bits under each, not only this CPU's best."""
    env = {k: v for k, v in os.environ.items() if k != "ATEN_CPU_CAPABILITY"}
    if capability:
        env["ATEN_CPU_CAPABILITY"] = capability
    proc = subprocess.run([sys.executable, "-c", _EVERY_SHORT_DIM], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
