"""MkDocs hook: links from a docs page to a repository file outside ``docs/`` (``../cluster.yaml``).

The pages are read in two places: on GitHub, where ``../cluster.yaml`` opens the file, and in the built
site, which holds only ``docs/``. MkDocs cannot resolve such a link and would warn (an error under
``strict``); turning ``validation.links.not_found`` down instead would hide broken links between pages
too. So this hook checks each repository link itself, before MkDocs sees it:

* the target must exist in the repository, else a warning (a failure under ``strict``) names it;
* in the site the link points at the file in the repository browser when ``repo_url`` is set,
  else it becomes its repository path in code (``cluster.yaml``), which a reader can open in a checkout.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

log = logging.getLogger("mkdocs.hooks.repo_links")

# [text](target) or [text](target#anchor), the target relative (no scheme, no leading / or #).
_LINK = re.compile(r"(?<!!)\[(?P<text>[^\]\n]*)\]"
                   r"\((?P<target>(?![a-z][a-z0-9+.-]*:|[/#])[^)\s#]+)(?P<anchor>#[^)\s]*)?\)")
_FENCE = re.compile(r"^\s*(```|~~~)")


def _rewrite(match: re.Match[str], page_dir: Path, docs_dir: Path, repo_root: Path, repo_url: str,
             src_uri: str) -> str:
    # normpath, not resolve(): the link is text relative to the page, whatever symlinks lie on the way.
    target = Path(os.path.normpath(page_dir / match["target"]))
    if target.is_relative_to(docs_dir) or not target.is_relative_to(repo_root):
        return match[0]  # a docs page or asset: MkDocs validates it
    rel = target.relative_to(repo_root).as_posix()
    if not target.exists():
        log.warning("Doc file '%s' contains a link '%s', but '%s' is not in the repository.", src_uri,
                    match["target"], rel)
    if repo_url:
        kind = "tree" if target.is_dir() else "blob"
        return f"[{match['text']}]({repo_url.rstrip('/')}/{kind}/HEAD/{rel}{match['anchor'] or ''})"
    text = match["text"].strip()
    if text.strip("`") == rel:
        return text if text.startswith("`") else f"`{rel}`"
    return f"{text} (`{rel}`)"


def on_page_markdown(markdown: str, page, config, files) -> str:
    docs_dir = Path(os.path.abspath(config["docs_dir"]))
    repo_root = Path(os.path.abspath(config["config_file_path"])).parent
    page_dir = Path(os.path.abspath(page.file.abs_src_path)).parent
    repo_url = config.get("repo_url") or ""
    out, in_fence = [], False
    for line in markdown.split("\n"):
        if _FENCE.match(line):
            in_fence = not in_fence
        if not in_fence:
            line = _LINK.sub(lambda m: _rewrite(m, page_dir, docs_dir, repo_root, repo_url, page.file.src_uri), line)
        out.append(line)
    return "\n".join(out)
