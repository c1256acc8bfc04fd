"""``bench/bench_kernels.py`` runs (so its figures can be regenerated), and what it reports of the
sigmoid-based tanh holds: within 2e-7 of ``torch.tanh``, and a module whose gradient is tanh's,
taken only on CPUs where MKL's tanh runs its generic code."""

from __future__ import annotations

import platform

import pytest
import torch

from bench import bench_kernels
from rl_system.algos import activations
from rl_system.algos.activations import FAST_MIN_NUMEL, Tanh


def test_the_kernel_table_is_measured_and_the_fast_tanh_is_tanh(monkeypatch):
    rows = bench_kernels.activation_rows()
    times = [value for _, kernel, value in rows if not kernel.startswith("max")]
    assert len(times) == 11 and all(t > 0 for t in times)
    (_, _, error), = [r for r in rows if r[1].startswith("max")]
    assert error < 2e-7
    monkeypatch.setattr(activations, "SIGMOID_TANH", True)  # the form an AMD CPU takes
    x = torch.randn(FAST_MIN_NUMEL // 64, 64, dtype=torch.float64).float().requires_grad_()
    y = Tanh()(x)
    assert "SigmoidTanh" in type(y.grad_fn).__name__
    y.sum().backward()
    assert torch.allclose(y, torch.tanh(x), atol=2e-7)
    assert torch.allclose(x.grad, 1 - torch.tanh(x.detach()).square(), atol=1e-6)


def test_the_tanh_forms_are_timed_in_an_update_and_the_rule_restored():
    rule = activations.SIGMOID_TANH
    (name, sigmoid_ms, tanh_ms), = bench_kernels.tanh_form_rows(["cartpole_ppo"], 1)
    assert name == "cartpole_ppo" and sigmoid_ms > 0 and tanh_ms > 0
    assert activations.SIGMOID_TANH is rule


def test_an_intel_cpu_keeps_torch_tanh(monkeypatch):
    monkeypatch.setattr(activations, "SIGMOID_TANH", False)
    x = torch.randn(FAST_MIN_NUMEL // 64 * 4, 64)
    assert torch.equal(Tanh()(x), torch.tanh(x))


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64") or not torch.backends.mkl.is_available(),
                    reason="MKL's tanh is an x86 matter")
@pytest.mark.parametrize("vendor, generic", [("GenuineIntel", False), ("AuthenticAMD", True), ("", False)])
def test_the_sigmoid_form_is_chosen_by_the_cpu_vendor(monkeypatch, vendor, generic):
    monkeypatch.setattr(activations, "cpu_vendor", lambda: vendor)
    assert activations.mkl_tanh_is_generic() is generic


def test_the_cpu_vendor_is_read():
    if platform.machine().lower() in ("x86_64", "amd64") and platform.system() == "Linux":
        assert activations.cpu_vendor() in ("GenuineIntel", "AuthenticAMD", "HygonGenuine")


def test_the_adam_table_times_both_steps_of_a_config():
    rows = bench_kernels.optimizer_rows(["cartpole_ppo"])
    assert [label for _, _, label, _ in rows] == ["torch.optim.Adam(fused=True)", "FusedAdam", "torch.optim.Adam()",
                                                  "LoopAdam"]
    assert all(name == "cartpole_ppo" and count > 1000 and us > 0 for name, count, _, us in rows)


def test_the_layout_table_times_both_layouts_of_each_shape():
    rows = bench_kernels.layout_rows()
    assert len(rows) == 9
    assert {op for _, op, _, _ in rows} == {"log_softmax fwd+bwd", "weight grad"}
    assert all(a > 0 and b > 0 for _, _, a, b in rows)
