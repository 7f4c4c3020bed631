"""MkDocs hook: the site holds docs/ and the files of the repository its pages link to.

The Markdown of docs/ links the way GitHub shows it: `../README.md`, `../CONTRIBUTING.md#tests`. MkDocs
knows only docs/, so those links would warn and lead nowhere in the site. This hook adds every file of
the repository outside docs/ that a page links to (and, for Markdown, the files it links to in turn) under
`repository/`, keeping their layout, and rewrites the links between the two trees. A link whose target is
not in the repository is left alone, so MkDocs still reports it (the build is strict)."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files, InclusionLevel
from mkdocs.structure.pages import Page

OUTSIDE_DOCS = "repository/"  # where the repository's files outside docs/ are in the site

# A fenced code block (left alone: its brackets are code) or an inline link's target.
_FENCE_OR_LINK = re.compile(r"(?ms)^(?P<fence>```|~~~).*?^(?P=fence)[ \t]*$"
                            r"|(?P<open>\]\()(?P<target>[^)\s#?]+)(?P<rest>[^)]*\))")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def _layout(config: MkDocsConfig) -> tuple[Path, str]:
    """The repository's root (mkdocs.yml's folder) and docs/ as a path within it."""
    root = Path(config.config_file_path).parent
    return root, Path(config.docs_dir).relative_to(root).as_posix()


def _repository_path(src_uri: str, docs: str) -> str:
    """Where a file of the site is in the repository."""
    if src_uri.startswith(OUTSIDE_DOCS):
        return src_uri[len(OUTSIDE_DOCS):]
    return posixpath.join(docs, src_uri)


def _site_uri(repository_path: str, docs: str) -> str:
    """Where a file of the repository is in the site."""
    if repository_path.startswith(docs + "/"):
        return repository_path[len(docs) + 1:]
    return OUTSIDE_DOCS + repository_path


def _targets(markdown: str, page_path: str, root: Path) -> Iterator[tuple[re.Match[str], str]]:
    """Each relative link of a page to a file of the repository: the match and the file's repository path."""
    for match in _FENCE_OR_LINK.finditer(markdown):
        target = match["target"]
        if target is None or target.startswith("/") or _SCHEME.match(target):
            continue
        path = posixpath.normpath(posixpath.join(posixpath.dirname(page_path), target))
        if not path.startswith("../") and (root / path).is_file():
            yield match, path


def on_files(files: Files, config: MkDocsConfig) -> Files:
    root, docs = _layout(config)
    pending = list(files.documentation_pages())
    while pending:
        page = pending.pop()
        for _, path in _targets(page.content_string, _repository_path(page.src_uri, docs), root):
            uri = _site_uri(path, docs)
            if files.get_file_from_path(uri) is None:
                # mkdocs.yml's nav names the ones a reader should find there (the README); the others are linked
                added = File.generated(config, uri, abs_src_path=str(root / path), inclusion=InclusionLevel.NOT_IN_NAV)
                files.append(added)
                if added.is_documentation_page():
                    pending.append(added)
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    root, docs = _layout(config)
    page_path = _repository_path(page.file.src_uri, docs)
    page_dir = posixpath.dirname(page.file.src_uri)
    pieces, done = [], 0
    for match, path in _targets(markdown, page_path, root):
        relative = posixpath.relpath(_site_uri(path, docs), page_dir or ".")
        pieces += [markdown[done:match.start("target")], relative]
        done = match.end("target")
    return "".join(pieces) + markdown[done:]
