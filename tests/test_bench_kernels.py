"""``bench/bench_kernels.py`` runs (so its figures can be regenerated), and what it reports of the
sigmoid-based tanh holds: within 2e-7 of ``torch.tanh``, and a module whose gradient is tanh's."""

from __future__ import annotations

import torch

from bench import bench_kernels
from rl_system.algos.activations import FAST_MIN_NUMEL, Tanh


def test_the_kernel_table_is_measured_and_the_fast_tanh_is_tanh():
    rows = bench_kernels.activation_rows()
    times = [value for _, kernel, value in rows if not kernel.startswith("max")]
    assert len(times) == 10 and all(t > 0 for t in times)
    (_, _, error), = [r for r in rows if r[1].startswith("max")]
    assert error < 2e-7
    x = torch.randn(FAST_MIN_NUMEL // 64, 64, dtype=torch.float64).float().requires_grad_()
    y = Tanh()(x)
    y.sum().backward()
    assert torch.allclose(y, torch.tanh(x), atol=2e-7)
    assert torch.allclose(x.grad, 1 - torch.tanh(x.detach()).square(), atol=1e-6)


def test_the_adam_table_times_both_steps_of_a_config():
    rows = bench_kernels.optimizer_rows(["cartpole_ppo"])
    assert [label for _, _, label, _ in rows] == ["torch.optim.Adam(fused=True)", "FusedAdam", "torch.optim.Adam()",
                                                  "LoopAdam"]
    assert all(name == "cartpole_ppo" and count > 1000 and us > 0 for name, count, _, us in rows)
