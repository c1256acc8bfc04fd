"""Griffe extension for the API reference (docs/api.md): Sphinx roles in docstrings as code.

The docstrings name other objects the Sphinx way (:class:`RunConfig`, :func:`~rl_system.api.train`),
which Markdown would render as the literal ``:class:`` followed by code. This turns each role into
its code span (``~`` keeps only the last dotted name, as in Sphinx). The source stays as it is:
the roles read well in the code and in ``help()``.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|attr|obj|data|exc|const):`(?P<tilde>~?)(?P<name>[^`]+)`")


def _code(match: re.Match[str]) -> str:
    name = match["name"]
    return f"`{name.rsplit('.', 1)[-1] if match['tilde'] else name}`"


class SphinxRolesAsCode(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _ROLE.sub(_code, obj.docstring.value)
