"""Adam without ``torch.optim``'s wrapper around the same arithmetic.

:class:`FusedAdam` takes the steps of ``torch.optim.Adam(params, lr, eps=eps, fused=True)`` bit for
bit (the same ``torch._fused_adam_`` kernel on the same tensors) and writes and reads the same
``state_dict`` layout, so a checkpoint of either loads into the other. Why not ``torch.optim``:

* its first call imports ``torch._dynamo`` (every ``Optimizer`` method is wrapped to keep dynamo
  out), seconds of a learner's start-up that a run without ``learner.compile`` never uses, on the
  critical path of every run and every learner restart;
* each ``step()`` spends time in Python (hooks, a profiler scope, dynamo graph breaks, regrouping
  the tensors) around the kernel, which a PPO update of many small minibatches pays at every step
  (docs/user_guide.md, "Start-up and shutdown"; ``python -m bench.bench_kernels``, its Adam table).

:class:`LoopAdam` is the same for ``torch.optim.Adam``'s per-tensor loop, the path torch takes
on CPU when neither ``fused`` nor ``foreach`` is asked for (HMASD's optimiser, whose results were
proven on it). Where the kernel is missing (a torch build without it), or for the per-tensor loop
off the CPU (torch takes ``foreach`` there), :func:`make_adam` returns ``torch.optim.Adam``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch


class FusedAdam:
    """Adam (no weight decay, no AMSGrad) over one parameter group; ``param_groups[0]["lr"]`` may
    be changed between steps, as with ``torch.optim``."""

    _FUSED = True  # the group's "fused" key; the step counters live on the device (else on the CPU)

    def __init__(self, params: Iterable[torch.nn.Parameter], lr: float, eps: float = 1e-8,
                 betas: tuple[float, float] = (0.9, 0.999)):
        self.params = list(params)
        # torch.optim.Adam(fused=True)'s group keys, so its load_state_dict accepts ours.
        self.param_groups = [{"lr": lr, "betas": betas, "eps": eps, "weight_decay": 0, "amsgrad": False,
                              "maximize": False, "foreach": None, "capturable": False, "differentiable": False,
                              "fused": True if self._FUSED else None, "decoupled_weight_decay": False,
                              "params": self.params}]
        self.state: dict[torch.nn.Parameter, dict[str, torch.Tensor]] = {}
        self._buckets: list[tuple[list, ...]] | None = None  # step's tensor lists (_bucket)
        self._bucket_grads: list[torch.Tensor | None] = []

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad.zero_()

    def _step_device(self, p: torch.nn.Parameter) -> torch.device | str:
        return p.device if self._FUSED else "cpu"

    def _state(self, p: torch.nn.Parameter) -> dict[str, torch.Tensor]:
        st = self.state.get(p)
        if st is None:  # as torch.optim.Adam starts it: a float32 step (fused: on the device)
            with torch.inference_mode(False):  # ordinary tensors, even when a step runs in inference mode
                st = self.state[p] = {"step": torch.zeros((), dtype=torch.float32, device=self._step_device(p)),
                                      "exp_avg": torch.zeros_like(p, memory_format=torch.preserve_format),
                                      "exp_avg_sq": torch.zeros_like(p, memory_format=torch.preserve_format)}
        return st

    @torch.no_grad()
    def step(self) -> None:
        """One Adam step of every parameter that has a gradient (the kernel takes one device and
        dtype per call)."""
        group = self.param_groups[0]
        current = [p.grad for p in self.params]
        if self._buckets is None or any(g is not c for g, c in zip(current, self._bucket_grads)):
            self._buckets, self._bucket_grads = self._bucket(), current
        beta1, beta2 = group["betas"]
        for params, grads, exp_avgs, exp_avg_sqs, steps in self._buckets:
            torch._foreach_add_(steps, 1)
            torch._fused_adam_(params, grads, exp_avgs, exp_avg_sqs, [], steps, amsgrad=False, lr=group["lr"],
                               beta1=beta1, beta2=beta2, weight_decay=group["weight_decay"], eps=group["eps"],
                               maximize=False, grad_scale=None, found_inf=None)

    def _bucket(self) -> list[tuple[list, ...]]:
        """The kernel's tensor lists, one set per device and dtype, of every parameter that has a
        gradient. :meth:`step` keeps them while the gradients are the same tensors (closed-form
        gradients write into the same views every step), so a step does not rebuild them
        (docs/lab/results.md, 2026-12-03)."""
        buckets: dict[tuple[torch.device, torch.dtype], tuple[list, ...]] = {}
        for p in self.params:
            if p.grad is None:
                continue
            st = self._state(p)
            lists = buckets.setdefault((p.device, p.dtype), ([], [], [], [], []))
            for out, t in zip(lists, (p, p.grad, st["exp_avg"], st["exp_avg_sq"], st["step"])):
                out.append(t)
        return list(buckets.values())

    def state_dict(self) -> dict[str, Any]:
        """``torch.optim.Adam``'s layout: per-parameter state keyed by the parameter's index."""
        index = {p: i for i, p in enumerate(self.params)}
        group = {**self.param_groups[0], "params": list(range(len(self.params)))}
        return {"state": {index[p]: dict(st) for p, st in self.state.items()}, "param_groups": [group]}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """From this class or ``torch.optim.Adam`` (fused or not): its moments, steps and
        hyper-parameters, moved to each parameter's device (steps as float32, as the kernel takes them)."""
        groups = state_dict["param_groups"]
        if len(groups) != 1 or len(groups[0]["params"]) != len(self.params):
            raise ValueError(f"optimizer state for {sum(len(g['params']) for g in groups)} parameters in "
                             f"{len(groups)} groups; this policy has {len(self.params)} in one")
        saved = groups[0]
        self.param_groups[0].update({k: saved[k] for k in ("lr", "betas", "eps") if k in saved})
        self.state, self._buckets = {}, None
        for i, st in state_dict["state"].items():
            p = self.params[saved["params"].index(i)]
            self.state[p] = {
                "step": torch.as_tensor(st["step"], dtype=torch.float32).to(self._step_device(p)).reshape(()),
                "exp_avg": st["exp_avg"].to(device=p.device, dtype=p.dtype),
                "exp_avg_sq": st["exp_avg_sq"].to(device=p.device, dtype=p.dtype)}


class LoopAdam(FusedAdam):
    """``torch.optim.Adam(params, lr, eps=eps)`` on CPU bit for bit: its per-tensor loop (a CPU
    float32 step counter, bias corrections in Python floats), without ``torch.optim``."""

    _FUSED = False

    @torch.no_grad()
    def step(self) -> None:
        group = self.param_groups[0]
        lr, eps = group["lr"], group["eps"]
        beta1, beta2 = group["betas"]
        for p in self.params:
            if p.grad is None:
                continue
            st = self._state(p)
            grad, exp_avg, exp_avg_sq = p.grad, st["exp_avg"], st["exp_avg_sq"]
            st["step"] += 1
            exp_avg.lerp_(grad, 1 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            step = st["step"].item()
            bias_correction2_sqrt = (1 - beta2 ** step) ** 0.5
            denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
            p.addcdiv_(exp_avg, denom, value=-(lr / (1 - beta1 ** step)))


def make_adam(params: Iterable[torch.nn.Parameter], lr: float, eps: float,
              fused: bool = True) -> FusedAdam | torch.optim.Adam:
    """``fused``: :class:`FusedAdam` where torch has the kernel on the parameters' device. Not
    ``fused``: the steps of ``torch.optim.Adam``'s default, :class:`LoopAdam` on CPU. Otherwise
    ``torch.optim.Adam`` itself."""
    params = list(params)
    device = params[0].device.type if params else "cpu"
    if not fused:
        return LoopAdam(params, lr=lr, eps=eps) if device == "cpu" else torch.optim.Adam(params, lr=lr, eps=eps)
    if hasattr(torch, "_fused_adam_") and device in ("cpu", "cuda"):
        return FusedAdam(params, lr=lr, eps=eps)
    return torch.optim.Adam(params, lr=lr, eps=eps, fused=device in ("cpu", "cuda"))
