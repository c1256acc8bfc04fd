"""docs/reference.md's tables, rendered from the code, so the manual says what the code takes:

* :func:`config_table`: a section of the run config (``env``, ``ppo``, ...; ``""`` for the top level),
  a row per key with its type, default and help, all read off the pydantic models
  (:data:`rl_system.config.RunConfig`; the help is the docstring under each field, or its ``description``);
* :func:`cli_synopsis` and :func:`cli_table`: the command line's synopsis and a table per command,
  every flag with its default and help, read off the argparse parsers
  (:func:`rl_system.cli.main.parser`).

``python -m bench.publish.pages`` writes them between their markers (``config``, ``config.<section>``,
``cli.synopsis``, ``cli.<command>``); a key, default, flag or help that changes in the code leaves
the page stale until then, and ``tests/docs/test_reference.py`` fails.
"""

from __future__ import annotations

import argparse
import ast
import functools
import inspect
import re
import textwrap
import types
import typing
from pathlib import Path
from typing import Any

import annotated_types as at
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from bench.harness.markdown import md_table
from bench.publish.report_md import ReportError


def _config() -> type[BaseModel]:
    from rl_system.config import RunConfig

    return RunConfig


# -- text ------------------------------------------------------------------------------------

_ROLE = re.compile(r":(?:mod|func|class|data|meth|attr):`~?([^`]+)`")
_RST_CODE = re.compile(r"``([^`]+)``")


def markdown(doc: str | None) -> str:
    """A docstring or help text as one table cell's text: reST roles and ````code```` as Markdown
    code, lines joined (:func:`bench.harness.markdown.md_table` escapes ``|``)."""
    text = " ".join((doc or "").split())
    text = _ROLE.sub(r"`\1`", text)
    return _RST_CODE.sub(r"`\1`", text)


def _value(v: Any) -> str:
    """A default as YAML spells it."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return f"{v:,}" if abs(v) >= 10_000 else str(v)
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e6:
        return f"{v:.1f}"
    if isinstance(v, float):
        return re.sub(r"e([+-])0*(\d)", lambda m: f"e{'-' if m.group(1) == '-' else ''}{m.group(2)}", f"{v:g}")
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_value(x)}" for k, x in v.items()) + "}"
    return str(getattr(v, "value", v))


def _code(text: str) -> str:
    return f"`{text}`"


# -- the run config --------------------------------------------------------------------------

_BOUNDS = ((at.Gt, "gt", ">"), (at.Ge, "ge", "≥"), (at.Lt, "lt", "<"), (at.Le, "le", "≤"))


def _bounds(metadata: list[Any]) -> str:
    """``≥ 1``, ``> 0``, ``in [0, 16]``, ``in (0, 1]``: the numeric bounds pydantic checks."""
    found = {attr: (sign, getattr(m, attr)) for kind, attr, sign in _BOUNDS for m in metadata if isinstance(m, kind)}
    low = found.get("gt") or found.get("ge")
    high = found.get("lt") or found.get("le")
    if low and high:
        return (f" in {'(' if 'gt' in found else '['}{_value(low[1])}, "
                f"{_value(high[1])}{')' if 'lt' in found else ']'}")
    return "".join(f" {bound[0]} {_value(bound[1])}" for bound in (low, high) if bound)


def _type_name(ann: Any, bounds: str = "") -> str:
    origin, args = typing.get_origin(ann), typing.get_args(ann)
    if origin is typing.Literal:
        return " | ".join(_code(str(a)) for a in args)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        shown = " or ".join(_type_name(a, bounds) for a in inner)
        return f"{shown} or null" if len(inner) < len(args) else shown
    if origin in (list, tuple):
        return f"list of {_type_name(args[0])}" if args else "list"
    if origin is dict:
        return "mapping" if not args or args[1] is Any else f"mapping to {_type_name(args[1])}"
    if ann is Any:
        return "any"
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return "{" + ", ".join(ann.model_fields) + "}"
    return getattr(ann, "__name__", str(ann)) + bounds


def type_name(field: FieldInfo) -> str:
    """The type a key takes, as a reader types it: ``int ≥ 1``, ``float > 0 or null``, `` `a` | `b` ``."""
    if any(getattr(getattr(m, "func", None), "__name__", "") == "_threads" for m in field.metadata):
        return "int ≥ 1 or `auto`"
    return _type_name(field.annotation, _bounds(field.metadata))


@functools.cache
def _attribute_docs(cls: type) -> dict[str, str]:
    """``{field: docstring}`` of the string literals right under a class's annotated attributes."""
    try:
        body = ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0].body
    except (OSError, TypeError):  # a class made at run time (create_model) has no source
        return {}
    return {node.target.id: inspect.cleandoc(nxt.value.value) for node, nxt in zip(body, body[1:])
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
            and isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant) and isinstance(nxt.value.value, str)}


def help_of(model: type[BaseModel], name: str) -> str:
    """A field's help: its ``description``, else the docstring under it in the class (or a base) that
    declares it."""
    field = model.model_fields[name]
    if field.description:
        return field.description
    return next((doc for cls in model.__mro__ if (doc := _attribute_docs(cls).get(name))), "")


def _is_section(field: FieldInfo) -> bool:
    ann = field.annotation
    return isinstance(ann, type) and issubclass(ann, BaseModel)


def leaves(model: type[BaseModel], prefix: str = "") -> list[tuple[str, FieldInfo, str]]:
    """``(dotted key, field, help)`` of every setting of ``model``, nested sections flattened."""
    out: list[tuple[str, FieldInfo, str]] = []
    for name, field in model.model_fields.items():
        if _is_section(field):
            out += leaves(field.annotation, f"{prefix}{name}.")
        else:
            out.append((prefix + name, field, help_of(model, name)))
    return out


def sections() -> list[str]:
    """The run config's sections, in the model's order."""
    return [name for name, field in _config().model_fields.items() if _is_section(field)]


def config_table(section: str = "") -> str:
    """The table of one section's keys (``""``: the top-level keys, and a row naming the sections)."""
    model = _config()
    if section:
        rows = leaves(model.model_fields[section].annotation, f"{section}.")
    else:
        rows = [(name, f, help_of(model, name)) for name, f in model.model_fields.items() if not _is_section(f)]
    body = [[_code(key), type_name(f), _code(_value(f.get_default(call_default_factory=True))), markdown(doc)]
            for key, f, doc in rows]
    if not section:
        body.append([", ".join(_code(s) for s in sections()), "section", "", "the sections below"])
    return md_table(["key", "type", "default", "meaning"], body)


# -- the command line ------------------------------------------------------------------------

def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """``(command path, its parser)`` of every leaf command, in the order ``--help`` lists them."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
        return
    for name, sub in subs[0].choices.items():
        yield from _commands(sub, (*path, name))


def commands() -> list[tuple[str, argparse.ArgumentParser]]:
    """``("air-combat range-map", parser)``, ... for every command of ``rl-system``."""
    from rl_system.cli.main import parser

    return [(" ".join(path), p) for path, p in _commands(parser())]


def _one_line_usage(p: argparse.ArgumentParser) -> str:
    wide = argparse.HelpFormatter(p.prog, width=100_000)
    wide.add_usage(p.usage, p._actions, p._mutually_exclusive_groups, prefix="")
    return wide.format_help().strip().replace(" [-h]", "")


def _top_level_tokens(usage: str) -> list[str]:
    """``usage`` split at the spaces outside brackets, so a wrap never breaks ``[--fps N]``."""
    tokens, depth, start = [], 0, 0
    for i, ch in enumerate(usage + " "):
        if ch in "[({":
            depth += 1
        elif ch in "])}":
            depth -= 1
        if ch == " " and depth == 0:
            tokens.append(usage[start:i])
            start = i + 1
    return [t for t in tokens if t]


def cli_synopsis(width: int = 104) -> str:
    """Every command's usage, as argparse builds it (without ``[-h]``), wrapped under its command."""
    lines = ["rl-system --version"]
    for command, p in commands():
        head = f"rl-system {command}"
        rest = " ".join(_top_level_tokens(_one_line_usage(p))[len(command.split()) + 1:])
        wrapped = _wrap_tokens(_top_level_tokens(rest), width - len(head) - 1)
        lines += [f"{head} {wrapped[0]}"] + [" " * (len(head) + 1) + w for w in wrapped[1:]]
    return "```\n" + "\n".join(lines) + "\n```"


def _wrap_tokens(tokens: list[str], width: int) -> list[str]:
    out = [""]
    for t in tokens:
        if out[-1] and len(out[-1]) + 1 + len(t) > width:
            out.append(t)
        else:
            out[-1] = f"{out[-1]} {t}".strip()
    return out


def _argument(action: argparse.Action) -> str:
    if not action.option_strings:
        return str(action.metavar or action.dest.upper())
    flag = max(action.option_strings, key=len)
    if action.nargs == 0:
        return flag
    if action.metavar:
        meta = str(action.metavar)
    elif action.choices:
        meta = "|".join(str(c) for c in action.choices)
    else:
        meta = action.dest.upper()
    return f"{flag} {meta} ..." if action.nargs in ("+", "*") else f"{flag} {meta}"


def _help(action: argparse.Action) -> tuple[str, str | None]:
    """The help text with ``%(default)s`` expanded, and the default it states in words, if any
    (``(default: 5)``, ``(default tune-<env>-<time>)``), which then leaves the text."""
    text = (action.help or "") % {"default": action.default, "prog": "", "metavar": action.metavar}
    m = re.search(r"\s*\(default:? ([^()]*(?:\([^()]*\)[^()]*)*)\)", text) or re.search(r";\s*default:? ([^;)]*)", text)
    if not m:
        return text, None
    return (text[:m.start()] + text[m.end():]).strip(), m.group(1).strip()


def _has_value(action: argparse.Action) -> bool:
    return bool(action.option_strings) and action.nargs != 0 and action.default not in (None, [], ())


def _plain(v: Any) -> str:
    """A default as help text writes it: ``0 90 180`` for ``[0.0, 90.0, 180.0]``."""
    if isinstance(v, (list, tuple)):
        return " ".join(_plain(x) for x in v)
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def _default(action: argparse.Action, stated: str | None) -> str:
    """The default cell: the value, or words (``required``, ``off``, what the help states). A help
    that states a value the parser does not have is a :class:`ReportError` naming both."""
    if stated is not None:
        if _has_value(action) and not stated.startswith(_plain(action.default)):
            raise ReportError(f"{max(action.option_strings, key=len)}: its help says default {stated!r}, "
                              f"the parser's is {_plain(action.default)!r}")
        return stated
    if action.required or (not action.option_strings and action.nargs not in ("?", "*")):
        return "required"
    if action.nargs == 0:
        return "off"  # a switch
    if not action.option_strings:
        return "—"  # an optional positional
    if action.default is None:
        return "none"
    if isinstance(action.default, (list, tuple)):
        return " ".join(_value(x) for x in action.default) or "—"
    return str(action.default) if isinstance(action.default, (str, Path)) else _value(action.default)


def cli_table(command: str) -> str:
    """The table of one command's arguments: each with its default and help."""
    p = dict(commands())[command]
    rows = []
    for action in p._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        text, stated = _help(action)
        rows.append([_code(_argument(action)), _default(action, stated), markdown(text)])
    return md_table(["argument", "default", "meaning"], rows)
