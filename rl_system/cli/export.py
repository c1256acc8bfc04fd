"""``rl-system export``: a trained policy as a file that runs without rl_system or Ray
(:func:`rl_system.api.export`, :mod:`rl_system.policy.export`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from rl_system.cli.common import add_pick_flag, fail


def add_parser(sub: argparse._SubParsersAction) -> None:
    x = sub.add_parser("export", help="a trained policy as a TorchScript or ONNX file that runs without rl_system or Ray")
    x.add_argument("checkpoint", metavar="CHECKPOINT", help="run dir, checkpoints dir or checkpoint file")
    x.add_argument("--format", dest="fmt", choices=("torchscript", "onnx"), required=True,
                   help="torchscript (torch.jit.load) or onnx (onnxruntime; needs onnx: pip install -e '.[export]')")
    x.add_argument("--out", type=Path, required=True, metavar="FILE",
                   help="the file to write (written whole or not at all)")
    add_pick_flag(x)
    x.add_argument("--agent", type=int, default=None, metavar="I",
                   help="a multi-agent (mappo) run: agent I's policy alone, its observation (and action mask) in, "
                        "its action and logp out (and value with a local critic); default: one graph for all agents")
    x.set_defaults(handler=cmd_export)


def cmd_export(args: argparse.Namespace) -> int:
    from rl_system.api import export
    from rl_system.policy.export import ExportError

    try:
        out = export(args.checkpoint, args.fmt, args.out, pick=args.pick, agent=args.agent)
    except ExportError as err:
        return fail(f"cannot export: {err}", 2)
    if args.agent is not None:
        print(f"wrote {out} ({args.fmt}: agent {args.agent}'s policy; inputs obs, then action_mask where the env "
              f"masks actions; outputs action, logp, then value with a local critic)")
    else:
        print(f"wrote {out} ({args.fmt}: one input per observation key, then state for a recurrent policy "
              f"(recurrent_state beside a multi-agent env's own state); outputs action, logp, value, then new_state)")
    return 0
