"""Every example in README.md and docs/*.md runs as written.

A small collector of our own rather than a Markdown plugin: a reader pastes a page's examples in order, into
one folder and one Python session, and runs its shell lines beside them, with a server started in one of them
still running for the next. So each page is one test that runs its ```python and ```bash blocks in order, in a
fresh folder and a fresh interpreter, the Python blocks in one namespace (markdown_pages.py). A block whose first
line is `# not run` is left out (it needs what a test cannot have, such as a second cluster or a package
install); other fences (text, console) are synopses and never run.

A shell line that starts `seglog serve` (with any options) is started in the background, waited for until it
serves, and stopped by its pid when the page is done. The ports of the examples (Pulsar's 6650 and 8080, 6651
and 8081 for a second cluster, 8443 for TLS) are replaced on the whole page by free ports, and a serve line
that names no port gets the free ones, so pages show the ports a reader uses and the suite never binds a
fixed port.
"""

import subprocess
import sys
from pathlib import Path

import pytest
from markdown_pages import ROOT, blocks_of

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUNNER = Path(__file__).with_name("markdown_pages.py")
PAGE_TIMEOUT_S = 480.0


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_page_examples_run_as_written(page: Path, tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(RUNNER), str(page)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=PAGE_TIMEOUT_S)
    assert done.returncode == 0, f"{page.relative_to(ROOT)}: an example failed:\n{done.stdout}{done.stderr}"


def test_blocks_are_found_with_their_lines(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("text\n```python\nx = 1\n```\n- item\n\n  ```bash\n  echo hi\n  ```\n```text\nsynopsis\n```\n"
                    "```python\n# not run\nimport missing\n```\n")
    blocks = blocks_of(page)
    assert [(b.line, b.language, b.code, b.runs) for b in blocks] == [
        (2, "python", "x = 1\n", True), (7, "bash", "echo hi\n", True), (10, "text", "synopsis\n", False),
        (13, "python", "# not run\nimport missing\n", False)]


def test_a_failing_example_fails_its_page_naming_the_line(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```python\nvalue = 1\n```\n\n```python\nprint(valeu)\n```\n")
    done = subprocess.run([sys.executable, str(RUNNER), str(page)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=PAGE_TIMEOUT_S)
    assert done.returncode != 0 and f'File "{page}", line 6' in done.stderr and "NameError" in done.stderr
