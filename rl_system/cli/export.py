"""``rl-system export``: a trained policy as a file that runs without rl_system or Ray
(:func:`rl_system.api.export`, :mod:`rl_system.policy.export`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from rl_system.cli.common import add_pick_flag, fail


def add_parser(sub: argparse._SubParsersAction) -> None:
    x = sub.add_parser("export", help="a trained policy as a TorchScript or ONNX file that runs without rl_system or Ray")
    x.add_argument("checkpoint", help="run dir, checkpoints dir or checkpoint file")
    x.add_argument("--format", dest="fmt", choices=("torchscript", "onnx"), required=True,
                   help="torchscript (torch.jit.load) or onnx (onnxruntime; needs onnx: pip install -e '.[export]')")
    x.add_argument("--out", type=Path, required=True, help="the file to write (written whole or not at all)")
    add_pick_flag(x)
    x.set_defaults(handler=cmd_export)


def cmd_export(args: argparse.Namespace) -> int:
    from rl_system.api import export
    from rl_system.policy.export import ExportError

    try:
        out = export(args.checkpoint, args.fmt, args.out, pick=args.pick)
    except ExportError as err:
        return fail(f"cannot export: {err}", 2)
    print(f"wrote {out} ({args.fmt}: one input per observation key, then state for a recurrent policy; "
          f"outputs action, logp, value, then new_state)")
    return 0
