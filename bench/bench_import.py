"""`import seglog` in a fresh interpreter: what every CLI call and every worker process pays first.

baseline  python -c pass           interpreter start-up alone
seglog    python -c 'import seglog'   at most 0.3 s more than the baseline

The seglog benchmark's note lists the heaviest top-level imports under `import seglog`, from one run of
`python -X importtime` (cumulative times), to show where the import time goes.
"""

from __future__ import annotations

import subprocess
import sys

GROUP = "import time"
ROUNDS = 15


def run_python(code: str, *options: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *options, "-c", code], check=True, capture_output=True, text=True)


def import_times(code: str) -> dict[str, float]:
    """Cumulative seconds of each top-level module imported while running `code` (python -X importtime)."""
    totals: dict[str, float] = {}
    for line in run_python(code, "-X", "importtime").stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = (field.strip() for field in line[len("import time:"):].split("|"))
        if cumulative.isdigit() and "." not in name:
            totals[name] = max(totals.get(name, 0.0), int(cumulative) / 1e6)
    return totals


def heaviest_imports(top: int = 5) -> list[tuple[str, float]]:
    """The slowest top-level imports that `import seglog` adds to the interpreter's own start-up."""
    startup = import_times("pass")
    added = {name: s for name, s in import_times("import seglog").items() if name not in startup}
    return sorted(added.items(), key=lambda item: -item[1])[:top]


def test_python_startup(bench):
    bench.baseline(GROUP, "python -c pass")
    bench.run(lambda: run_python("pass"), rounds=ROUNDS, warmup_rounds=2)


def test_import_seglog(bench):
    bench.seglog(GROUP, "python -c 'import seglog'", max_extra_seconds={"python -c pass": 0.3})
    bench.run(lambda: run_python("import seglog"), rounds=ROUNDS, warmup_rounds=2)
    heaviest = heaviest_imports()
    bench.note("heaviest imports: " + ", ".join(f"{name} {seconds * 1e3:.0f} ms" for name, seconds in heaviest))
