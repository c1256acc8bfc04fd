"""A trained policy as an inference-only graph that runs without this package or Ray:
TorchScript (``torch.jit.load``) or ONNX (``onnxruntime``).

The graph takes the observation keys in the order of the env's observation spec (one input per
key, a batch on the leading axis) and returns ``(action, logp, value)`` for the deterministic
action (argmax, or the Gaussian's mean), with the policy's observation normalisation inside.
A recurrent policy (GRU or LSTM core) takes one more input, ``state[B, S]`` (zeros where an
episode begins; ``recurrent_state[B, n, S]`` for a multi-agent policy, whose ``state`` is the
env's), and returns one more output, ``new_state``, to feed back on the next step.
A multi-agent (MAPPO) policy exports as one graph acting for every agent, or, with ``agent``, as
that agent's policy alone (:mod:`rl_system.algos.mappo.one_agent`: its observation in, its action
and logp out). The file is written to a temporary name and renamed, so a failed export leaves nothing behind.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import torch
from torch import nn

from rl_system.algos.registry import MissingCapability, require
from rl_system.algos.spec import AGENT_EXPORT
from rl_system.envs.base import STATE
from rl_system.filesystems import atomic_path

FORMATS = ("torchscript", "onnx")


class ExportError(ValueError):
    """What cannot be exported, or with what, in one line."""


class _Deterministic(nn.Module):
    """The policy's deterministic step on positional observation tensors."""

    def __init__(self, network: nn.Module, keys: list[str]):
        super().__init__()
        self.network, self.keys = network, keys

    def forward(self, *obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        action, logp, value = self.network.act(dict(zip(self.keys, obs)), deterministic=True)
        return action, logp, _return_units(self.network, value)


class _RecurrentDeterministic(nn.Module):
    """A recurrent policy's deterministic step: observation tensors then ``state[B, S]`` in,
    ``(action, logp, value, new_state)`` out."""

    def __init__(self, network: nn.Module, keys: list[str]):
        super().__init__()
        self.network, self.keys = network, keys

    def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        *obs, state = inputs
        action, logp, value, new_state = self.network.act(dict(zip(self.keys, obs)), state, deterministic=True)
        return action, logp, _return_units(self.network, value), new_state


def _return_units(network: nn.Module, value: torch.Tensor) -> torch.Tensor:
    """The critic's output in return units: a MAPPO critic with ``value_norm`` predicts normalised ones."""
    norm = getattr(network, "value_norm", None)
    return value if norm is None else norm.denormalize(value)


def graph_io(policy) -> tuple[list[str], list[str]]:
    """The exported graph's input and output names for ``policy`` (an :class:`rl_system.api.Policy`).
    The recurrent state's input is ``state``, or ``recurrent_state`` where an observation key is
    ``state`` (a multi-agent env's global state)."""
    if policy.recurrent:
        state = "recurrent_state" if STATE in policy.obs_keys else "state"  # never the env's own global state
        return [*policy.obs_keys, state], ["action", "logp", "value", "new_state"]
    return list(policy.obs_keys), ["action", "logp", "value"]


def check_format(fmt: str) -> None:
    """:class:`ExportError` (one line) for a format this cannot write, or whose package is missing."""
    if fmt not in FORMATS:
        raise ExportError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if fmt == "onnx":
        try:
            import onnx  # noqa: F401 - the exporter writes through it
        except ImportError:
            raise ExportError("ONNX export needs the onnx package: pip install onnx (or pip install -e '.[export]' "
                              "in a checkout)") from None


def check_agent(policy, agent: int) -> None:
    """:class:`ExportError` (one line) where ``policy`` has no agent ``agent`` to export alone."""
    try:
        require(policy.cfg.algo, AGENT_EXPORT, f"--agent on a {policy.cfg.algo} run of {policy.cfg.env.name!r}")
    except MissingCapability as err:
        raise ExportError(str(err)) from None
    if policy.recurrent:
        raise ExportError("a recurrent MAPPO policy exports as one graph for all its agents (their states travel "
                          "together); --agent takes a feedforward one (mappo.recurrent: none)")
    n = policy.network.num_agents
    if not 0 <= agent < n:
        raise ExportError(f"agent {agent} is out of range: {policy.cfg.env.name!r} has agents 0 to {n - 1}")


def _graph(policy, agent: int | None) -> tuple[nn.Module, tuple[torch.Tensor, ...], list[str], list[str]]:
    """``(module, example inputs, input names, output names)`` of what is exported."""
    if agent is not None:
        from rl_system.algos.mappo import one_agent

        inputs, outputs = one_agent.graph_io(policy.network, policy.obs_keys)
        example = one_agent.example_inputs(policy.network, agent, policy.obs_keys)
        return one_agent.OneAgentPolicy(policy.network.eval(), agent).eval(), example, inputs, outputs
    wrapper = _RecurrentDeterministic if policy.recurrent else _Deterministic
    example = tuple(torch.zeros(2, *spec.shape, dtype=spec.dtype) for spec in policy.obs_spec.values())
    if policy.recurrent:
        example += (policy.network.initial_state(2),)
    return wrapper(policy.network.eval(), policy.obs_keys).eval(), example, *graph_io(policy)


def export_policy(policy, fmt: str, out: str | Path, agent: int | None = None) -> Path:
    """Write ``policy`` (an :class:`rl_system.api.Policy`, as :func:`rl_system.api.load_policy`
    returns it) to ``out`` as a ``fmt`` graph; ``agent``: that agent's policy alone (a MAPPO
    policy). Returns the path."""
    check_format(fmt)
    if agent is not None:
        check_agent(policy, agent)
    module, example, inputs, outputs = _graph(policy, agent)
    out = Path(out)
    with atomic_path(out) as tmp, torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tracer's notes on Python control flow fixed at trace time
        if fmt == "torchscript":
            torch.jit.save(torch.jit.trace(module, example), tmp)
        else:
            axes = {name: {0: "batch"} for name in [*inputs, *outputs]}
            torch.onnx.export(module, example, tmp, dynamo=False, input_names=inputs, output_names=outputs,
                              dynamic_axes=axes)
    return out
