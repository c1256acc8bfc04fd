"""FusedAdam and LoopAdam take torch.optim.Adam's steps bit for bit (fused=True, and the default
per-tensor loop on CPU) and share its checkpoints."""

import copy
import subprocess
import sys

import pytest
import torch

from rl_system.algos.adam import FusedAdam, LoopAdam, make_adam

# ours -> the torch.optim.Adam options whose steps it takes
PAIRS = [pytest.param(FusedAdam, {"fused": True}, id="fused"), pytest.param(LoopAdam, {}, id="loop")]


def _net(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(5, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))


def _steps(net: torch.nn.Module, opt, n: int, seed: int, lr_at=None) -> None:
    gen = torch.Generator().manual_seed(seed)
    for i in range(n):
        opt.zero_grad(set_to_none=True)
        x = torch.randn(32, 5, generator=gen)
        net(x).square().mean().backward()
        if i % 3 == 2:
            net[2].bias.grad = None  # a parameter without a gradient this step is left alone
        if lr_at is not None:
            opt.param_groups[0]["lr"] = lr_at(i)
        opt.step()


def _same(a: torch.nn.Module, b: torch.nn.Module) -> None:
    for (k, x), y in zip(a.state_dict().items(), b.state_dict().values()):
        assert torch.equal(x, y), k


@pytest.mark.parametrize("cls, options", PAIRS)
def test_steps_are_torch_adams_bit_for_bit_with_a_changing_lr(cls, options):
    ours, theirs = _net(0), _net(0)
    a = cls(ours.parameters(), lr=3e-3, eps=1e-5)
    b = torch.optim.Adam(theirs.parameters(), lr=3e-3, eps=1e-5, **options)

    def schedule(i: int) -> float:  # an annealed lr, as PPO's
        return 3e-3 * (1 - i / 40)

    _steps(ours, a, 20, seed=1, lr_at=schedule)
    _steps(theirs, b, 20, seed=1, lr_at=schedule)
    _same(ours, theirs)
    sa, sb = a.state_dict(), b.state_dict()
    assert sa["param_groups"] == sb["param_groups"]
    assert sa["state"].keys() == sb["state"].keys()
    for i in sa["state"]:
        for k in ("step", "exp_avg", "exp_avg_sq"):
            assert torch.equal(sa["state"][i][k], sb["state"][i][k]), (i, k)
            assert sa["state"][i][k].device == sb["state"][i][k].device, (i, k)


@pytest.mark.parametrize("cls, options", PAIRS)
def test_each_loads_the_others_state_and_goes_on_identically(cls, options):
    ours, theirs = _net(1), _net(1)
    a = cls(ours.parameters(), lr=1e-2, eps=1e-5)
    b = torch.optim.Adam(theirs.parameters(), lr=1e-2, eps=1e-5, **options)
    _steps(ours, a, 5, seed=2)
    _steps(theirs, b, 5, seed=2)
    # Swap the optimiser states: each goes on from the other's moments and steps.
    a_state, b_state = a.state_dict(), b.state_dict()
    a2, b2 = cls(ours.parameters(), lr=0.0, eps=1.0), torch.optim.Adam(theirs.parameters(), lr=1e-2, **options)
    a2.load_state_dict(b_state)
    b2.load_state_dict(a_state)
    assert a2.param_groups[0]["lr"] == 1e-2 and a2.param_groups[0]["eps"] == 1e-5
    _steps(ours, a2, 5, seed=3)
    _steps(theirs, b2, 5, seed=3)
    _same(ours, theirs)


def test_gradients_written_in_place_into_the_same_tensors_step_as_torch_adams():
    """Closed-form gradients land in the same views every step, so FusedAdam keeps its kernel's
    tensor lists between steps: a gradient that goes away or comes back, and a restored state,
    must still be seen."""
    ours, theirs = _net(2), _net(2)
    a = FusedAdam(ours.parameters(), lr=1e-2, eps=1e-5)
    b = torch.optim.Adam(theirs.parameters(), lr=1e-2, eps=1e-5, fused=True)
    grads = [torch.zeros_like(p) for p in ours.parameters()]
    gen = torch.Generator().manual_seed(4)
    for i in range(12):
        values = [torch.randn(g.shape, generator=gen) for g in grads]
        for p, g, v in zip(ours.parameters(), grads, values):
            g.copy_(v)  # in place, as the closed form writes its buffer's views
            p.grad = None if i == 4 and p is ours[2].bias else g
        for p, v in zip(theirs.parameters(), values):
            p.grad = None if i == 4 and p is theirs[2].bias else v.clone()
        if i == 3:
            earlier = copy.deepcopy(b.state_dict())  # (its live tensors otherwise)
        if i == 8:  # both go back to the earlier moments: the kept lists must not be the current ones
            a.load_state_dict(copy.deepcopy(earlier))
            b.load_state_dict(copy.deepcopy(earlier))
        a.step()
        b.step()
    _same(ours, theirs)


def test_a_state_for_another_network_is_refused():
    a = FusedAdam(_net(0).parameters(), lr=1e-3)
    other = torch.optim.Adam(torch.nn.Linear(2, 2).parameters(), lr=1e-3)
    try:
        a.load_state_dict(other.state_dict())
    except ValueError as err:
        assert "2 parameters" in str(err) and "has 4" in str(err)
    else:
        raise AssertionError("a mismatched optimizer state was accepted")


LEARNERS = [("cartpole_ppo", ["learner.gradients=autograd"]), ("alice_bob_hmasd", ["workers.num_envs=2"])]
START_UPDATE_SNAPSHOT = """
import sys
from rl_system import openmp
openmp.set_default()  # before torch loads, as in a run's processes
from rl_system.actors.learner import Learner
from rl_system.actors.worker import RolloutWorker
from rl_system.config import load_config
for config, overrides in {learners!r}:
    cfg = load_config(f"launch/configs/{{config}}.yaml", overrides).model_dump()
    w = RolloutWorker(0, cfg)
    learner = Learner(cfg, *w.specs())
    learner.update(w.sample(learner.get_weights(), 0)[1])
    learner.state()
    print(config, "torch._dynamo" in sys.modules)
"""


def test_a_learner_starts_updates_and_snapshots_without_importing_torch_dynamo():
    """torch.optim's first call imports torch._dynamo (seconds of CPU per learner start). Each
    learner in turn in one fresh interpreter (one torch import, not one per learner), checked after
    each: an import stays in sys.modules, so a later False means neither imported it."""
    code = START_UPDATE_SNAPSHOT.format(learners=LEARNERS)
    out = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-len(LEARNERS):] == [f"{config} False" for config, _ in LEARNERS]


def test_make_adam_on_cpu_is_ours_in_either_mode():
    assert type(make_adam(_net(0).parameters(), lr=1e-3, eps=1e-5)) is FusedAdam
    assert type(make_adam(_net(0).parameters(), lr=1e-3, eps=1e-5, fused=False)) is LoopAdam
