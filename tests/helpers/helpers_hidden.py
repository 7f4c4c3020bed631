"""Run a program where a directory cannot be seen: in a private mount namespace (`unshare -m`, as root) with an
empty tmpfs mounted over the directory, so the program and every process it starts (a Spark driver's JVM, its
Python workers) see nothing of what the directory holds, as the executors of a Spark cluster on other hosts see
nothing of a server's data directory. The mount goes with the namespace when the program exits."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

TIMEOUT_S = 240.0
PRELUDE = '''\
import json, os, sys
HIDDEN, PARAMETERS = sys.argv[1], json.loads(sys.argv[2])
assert os.listdir(HIDDEN) == [], f"{HIDDEN} is visible: {os.listdir(HIDDEN)}"
def answer(value):
    print("ANSWER " + json.dumps(value), flush=True)
'''




def run_hidden(hidden: Path, program: str, parameters: dict[str, Any], *, env: dict[str, str] | None = None,
               timeout: float = TIMEOUT_S) -> Any:
    """Run `program` (Python, after PRELUDE: it has `HIDDEN`, `PARAMETERS` and `answer(value)`) with `hidden` out
    of sight; what it passed to answer(), or AssertionError with its output when it failed."""
    if os.geteuid() != 0:
        pytest.skip("hiding a directory needs root (a mount namespace of its own)")
    assert shutil.which("unshare") is not None, "unshare (util-linux) is not on PATH: the test cannot hide anything"
    script = hidden.parent / f"hidden-{os.getpid()}-{len(program)}.py"
    script.write_text(PRELUDE + program)
    command = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
               'mount -t tmpfs seglog-hidden "$1" && shift && exec "$@"', "sh", str(hidden),
               sys.executable, str(script), str(hidden), json.dumps(parameters)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})
    answers = [line[len("ANSWER "):] for line in done.stdout.splitlines() if line.startswith("ANSWER ")]
    if done.returncode != 0 or not answers:
        raise AssertionError(f"the hidden program exited with {done.returncode}:\n{done.stdout[-4000:]}\n"
                             f"{done.stderr[-8000:]}")
    return json.loads(answers[-1])
