"""The pages' tables of what each algorithm does, rendered from the algorithm registry
(:mod:`rl_system.algos.registry`), so that a capability added or dropped in an algorithm's ``spec``
shows in README and the reference at the next ``python -m bench.publish.pages`` (and a test fails until
then):

* :func:`render_supports`: README's *What it supports*, a row per headline capability;
* :func:`render_algorithms`: docs/reference.md's *Algorithms*, each algorithm's entry and the whole
  capability matrix;
* :func:`render_limits`: docs/limitations.md's *What each algorithm lacks* and which envs draw
  pictures and videos.
"""

from __future__ import annotations

from rl_system.algos import registry
from rl_system.algos import spec as cap
from rl_system.algos.spec import AlgorithmSpec

YES, NO = "✓", "–"
ACTIONS = (cap.DISCRETE, cap.MULTI_DISCRETE, cap.CONTINUOUS)
ACTION_NAMES = {cap.DISCRETE: "discrete", cap.MULTI_DISCRETE: "multi-discrete with masks", cap.CONTINUOUS: "continuous"}


def _actions(spec: AlgorithmSpec) -> str:
    kinds = ", ".join(ACTION_NAMES[c] for c in ACTIONS if spec.has(c))
    return f"per agent: {kinds}" if spec.has(cap.MULTI_AGENT) else kinds


def _mark(spec: AlgorithmSpec, capability: cap.Capability, detail: str = "") -> str:
    return (f"{YES} {detail}".strip()) if spec.has(capability) else NO


def _recurrent(spec: AlgorithmSpec) -> str:
    return f"{YES} (`{spec.recurrent_key}`)" if spec.has(cap.RECURRENT) and spec.recurrent_key else _mark(spec, cap.RECURRENT)


def _export(spec: AlgorithmSpec) -> str:
    if not spec.has(cap.EXPORT):
        return NO
    if spec.has(cap.MULTI_AGENT):
        return f"{YES} one graph for all agents" + (", or one agent's alone" if spec.has(cap.AGENT_EXPORT) else "")
    return YES


def render_supports() -> str:
    """README's *What it supports*: a column per registered algorithm."""
    specs = list(registry.specs().values())
    rows = [("actions", _actions),
            ("multi-agent", lambda s: _mark(s, cap.MULTI_AGENT) + (", agents of different kinds in groups"
                                                                   if s.has(cap.AGENT_GROUPS) else "")),
            ("recurrent core", _recurrent),
            ("evaluation", lambda s: YES + (", videos" if s.has(cap.VIDEOS) else "")),
            ("ONNX / TorchScript export", _export),
            ("learner group (data-parallel)", lambda s: _mark(s, cap.LEARNER_GROUP))]
    lines = ["| | " + " | ".join(s.title for s in specs) + " |", "|---|" + "---|" * len(specs)]
    lines += [f"| {name} | " + " | ".join(cell(s) for s in specs) + " |" for name, cell in rows]
    return "\n".join(lines) + "\n"


def render_algorithms() -> str:
    """docs/reference.md's *Algorithms*: each registered algorithm, then every capability by algorithm."""
    specs = list(registry.specs().values())
    out = []
    for s in specs:
        out += [f"**{s.title}** (`algo: {s.name}`, settings in `{s.name}:`): {s.summary}"
                + (f" *{s.paper}.*" if s.paper else ""), ""]
    out += ["| capability | turned on by | " + " | ".join(f"`{s.name}`" for s in specs) + " |",
            "|---|---|" + "---|" * len(specs)]
    for c in cap.CAPABILITIES:
        switch = f"`{c.switch}`" if c.switch else "–"
        out.append(f"| {c.title} | {switch} | " + " | ".join(YES if s.has(c) else NO for s in specs) + " |")
    return "\n".join(out) + "\n"


def _applies(spec: AlgorithmSpec, capability: cap.Capability) -> bool:
    """Whether lacking ``capability`` means anything for ``spec``: one agent's export is a
    multi-agent policy's, greedy levels a hierarchy's."""
    if capability is cap.AGENT_EXPORT:
        return spec.has(cap.MULTI_AGENT)
    return capability is not cap.GREEDY_LEVELS


def render_limits() -> str:
    """docs/limitations.md's generated part: per algorithm, the capabilities it lacks (those some
    other algorithm has); then the envs with a renderer of their own."""
    from rl_system.envs import registered_names
    from rl_system.envs.render import renderer_names

    specs = list(registry.specs().values())
    out = ["| algorithm | lacks (another algorithm has it) |", "|---|---|"]
    for s in specs:
        lacks = [c.title for c in cap.CAPABILITIES if not s.has(c) and any(o.has(c) for o in specs) and _applies(s, c)]
        out.append(f"| {s.title} (`{s.name}`) | {'; '.join(lacks) or NO} |")
    drawn = renderer_names()
    undrawn = [n for n in registered_names() if n not in drawn]
    out += ["", f"Built-in envs with a renderer (`rl-system eval --render` / `--video`): {', '.join(drawn)}. "
            f"Without one: {', '.join(undrawn) or NO}."]
    return "\n".join(out) + "\n"
