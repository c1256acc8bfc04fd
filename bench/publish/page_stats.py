"""How long a page is to read: lines, words, bytes and the numeric figures outside code.

    python -m bench.publish.page_stats                    # README.md
    python -m bench.publish.page_stats README.md docs/index.md

A *numeric figure* is a number a reader has to take in: a run of digits (with its separators,
``295,412`` or ``1.8``) in running text or a table, not inside a fenced code block, an inline code
span or a link target. Code is what a reader copies, not what they read.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

FENCE = re.compile(r"^\s*(```|~~~)")
INLINE_CODE = re.compile(r"`[^`]*`")
LINK_TARGET = re.compile(r"\]\([^)]*\)")
HTML_COMMENT = re.compile(r"<!--.*?-->")
FIGURE = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*")


@dataclass(frozen=True)
class PageStats:
    lines: int
    words: int
    bytes: int
    figures: int


def prose(text: str) -> list[str]:
    """The page's lines outside fenced code blocks, without inline code, link targets or comments."""
    out, inside = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            inside = not inside
            continue
        if not inside:
            out.append(HTML_COMMENT.sub("", LINK_TARGET.sub("]", INLINE_CODE.sub("", line))))
    return out


def page_stats(text: str) -> PageStats:
    readable = prose(text)
    return PageStats(lines=len(text.splitlines()), words=len(text.split()), bytes=len(text.encode()),
                     figures=sum(len(FIGURE.findall(line)) for line in readable))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.publish.page_stats", description=__doc__.split("\n\n")[0])
    ap.add_argument("pages", nargs="*", type=Path, default=[Path("README.md")],
                    help="Markdown pages (default: README.md)")
    args = ap.parse_args(argv)
    print("| page | lines | words | bytes | numeric figures outside code |")
    print("|---|---|---|---|---|")
    for page in args.pages:
        try:
            s = page_stats(page.read_text())
        except OSError as err:
            print(f"python -m bench.publish.page_stats: {page}: {err.strerror}", file=sys.stderr)
            return 2
        print(f"| {page} | {s.lines} | {s.words:,} | {s.bytes:,} | {s.figures} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
