"""Runs one Markdown page's examples as a reader would, in a fresh interpreter (tests/docs/test_examples.py starts
it once a page): `python markdown_pages.py PAGE` in the folder the page's examples are to run in. A fresh
interpreter a page, as a reader's fresh session: nothing of another page (a Spark JVM started in another folder,
an open log, a name defined) leaks into it. Exit code 0 when every block ran."""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUN_LANGUAGES = {"python", "bash"}
NOT_RUN = "# not run"
EXAMPLE_PORTS = ("6650", "6651", "8080", "8081", "8443", "8815")
SERVE_LINE = re.compile(r"^seglog\b(?:\s+--data\s+\S+)?\s+serve\b")
SHELL_TIMEOUT_S = 300.0
SERVE_TIMEOUT_S = 30.0
FENCE = re.compile(r"^(?P<indent>\s*)```(?P<info>[^`]*)$")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    language: str
    code: str

    @property
    def where(self) -> str:
        shown = self.page.relative_to(ROOT) if self.page.is_relative_to(ROOT) else self.page
        return f"{shown}:{self.line}"

    @property
    def runs(self) -> bool:
        return self.language in RUN_LANGUAGES and not self.code.lstrip().startswith(NOT_RUN)


def blocks_of(page: Path) -> list[Block]:
    """The fenced code blocks of a Markdown page, in order, their indentation (in list items) removed."""
    blocks: list[Block] = []
    opening: tuple[int, str, str] | None = None
    lines: list[str] = []
    for number, text in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        fence = FENCE.match(text)
        if opening is None:
            if fence:
                opening = (number, fence["indent"], fence["info"].strip().split(" ")[0])
                lines = []
        elif fence and fence["info"].strip() == "":
            line, indent, language = opening
            blocks.append(Block(page, line, language, "\n".join(s.removeprefix(indent) for s in lines) + "\n"))
            opening = None
        else:
            lines.append(text)
    assert opening is None, f"{page.relative_to(ROOT)}:{opening[0]}: a code block is never closed"
    return blocks


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Page:
    """What a reader's session holds while they work through one page: a folder, a Python namespace, servers."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.namespace: dict[str, object] = {"__name__": "__main__"}
        self.ports = {port: str(free_port()) for port in EXAMPLE_PORTS}
        self.servers: list[subprocess.Popen] = []
        bin_dir = str(Path(sys.executable).parent)  # the `seglog` of the Python that runs the suite
        self.env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
        self.env.pop("SEGLOG_DATA", None)

    def with_ports(self, code: str) -> str:
        for example, port in self.ports.items():
            code = re.sub(rf"\b{example}\b", port, code)
        return code

    def run(self, block: Block) -> None:
        code = self.with_ports(block.code)
        if block.language == "python":
            # blank lines up to the block: a traceback names the page's own line, and shows it
            exec(compile("\n" * block.line + code, str(block.page), "exec"), self.namespace)
        else:
            self.run_shell(block, code)

    def run_shell(self, block: Block, code: str) -> None:
        """Run the block's lines as one script, but for `seglog serve` lines, which start in the background."""
        script: list[str] = []
        for line in code.replace("\\\n", " ").splitlines():
            if SERVE_LINE.match(line.strip()):
                self.run_script(block, script)
                script = []
                self.start_server(block, line)
            else:
                script.append(line)
        self.run_script(block, script)

    def run_script(self, block: Block, lines: list[str]) -> None:
        script = "\n".join(lines)
        if not script.strip():
            return
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=self.folder, env=self.env,
                              capture_output=True, text=True, timeout=SHELL_TIMEOUT_S)
        assert done.returncode == 0, f"{block.where}: exited {done.returncode}:\n{script}\n{done.stdout}{done.stderr}"

    def start_server(self, block: Block, command: str) -> None:
        words = shlex.split(command.split("#", 1)[0].strip().removesuffix("&"))  # `&`: as a reader runs it
        if "--port" not in words:
            words += ["--port", self.ports["6650"]]
        if "--http-port" not in words:
            words += ["--http-port", self.ports["8080"]]
        if "--flight-port" not in words:  # the default, 8815, is the page's first server's; the others' free ones
            words += ["--flight-port", "0" if self.servers else self.ports["8815"]]
        server = subprocess.Popen(words, cwd=self.folder, env=self.env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True)
        self.servers.append(server)
        http_url = f"http://127.0.0.1:{words[words.index('--http-port') + 1]}"
        deadline = time.monotonic() + SERVE_TIMEOUT_S
        while time.monotonic() < deadline and server.poll() is None:
            try:
                with urllib.request.urlopen(f"{http_url}/admin/v2/brokers/health", timeout=5) as answer:
                    if answer.read() == b"ok":
                        return
            except OSError:
                time.sleep(0.05)  # the port is not bound yet; bounded by the deadline
        raise AssertionError(f"{block.where}: `{command.strip()}` did not serve within {SERVE_TIMEOUT_S}s:\n"
                             f"{self.stop_servers()}")

    def stop_servers(self) -> str:
        """Stop every server by its pid; what they wrote to stderr."""
        logs = []
        for server in self.servers:
            if server.poll() is None:
                server.send_signal(signal.SIGTERM)
            try:
                _, err = server.communicate(timeout=SERVE_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                server.kill()
                _, err = server.communicate(timeout=SERVE_TIMEOUT_S)
            logs.append(err)
        self.servers.clear()
        return "\n".join(logs)


def run_page(page: Path, folder: Path) -> None:
    session = Page(folder)
    try:
        for block in blocks_of(page):
            if block.runs:
                session.run(block)
    finally:
        session.stop_servers()


if __name__ == "__main__":
    os.environ.pop("SEGLOG_DATA", None)
    run_page(Path(sys.argv[1]).resolve(), Path.cwd())
