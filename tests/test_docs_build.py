"""The documentation site (mkdocs.yml) builds without a warning: docs/*.md as they are, the repository's
files they link to, and the API reference that mkdocstrings generates from the docstrings and the kernels'
.pyi stubs. The build is strict, so a broken link or #anchor, a page left out of the nav and a reference
that does not resolve each fail it; the failure lists every warning.

It builds from this checkout's docs/ and sources, read statically (griffe imports nothing), so it tests
the same files whether seglog is installed editable or from a wheel."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
BUILD_SECONDS = 120  # a bound for a loaded machine: the build takes a few seconds


def test_the_docs_build_without_a_warning(tmp_path):
    build = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
                            str(ROOT / "mkdocs.yml"), "--site-dir", str(tmp_path / "site")],
                           cwd=ROOT, capture_output=True, text=True, timeout=BUILD_SECONDS)
    warnings = [line for line in build.stderr.splitlines() if line.startswith(("WARNING", "ERROR"))]
    assert build.returncode == 0 and not warnings, \
        "the docs build warned:\n" + "\n".join(warnings or build.stderr.splitlines()[-20:])
    assert (tmp_path / "site" / "api" / "index.html").is_file()


def test_the_index_links_every_page():
    index = (DOCS / "index.md").read_text()
    linked = set(re.findall(r"\]\(([A-Z][A-Z_]*\.md)[)#]", index))
    pages = {page.name for page in DOCS.glob("*.md")} - {"index.md"}
    assert pages <= linked, f"docs/index.md does not link {', '.join(sorted(pages - linked))}"
