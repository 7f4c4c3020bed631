"""The benchmark convention: every seglog figure is printed next to a baseline measured in the same run.

This machine is shared and noisy, so absolute numbers drift between runs while ratios hold. Each benchmark
group therefore holds one or more *baselines* (a plain-Python or physical-limit way to do the same work)
and the *seglog* benchmarks, each of which states its targets against those baselines:

    def test_python_loop(bench):
        bench.baseline(GROUP, "python loop", messages=n, nbytes=n * 100)
        bench.run(write_loop, setup=fresh_file)

    def test_send_batch(bench):
        bench.seglog(GROUP, "send_batch(list)", messages=n, nbytes=n * 100,
                     at_least={"python loop": 4})      # >= 4x the baseline labelled "python loop"
        bench.run(send_all, setup=fresh_log, teardown=close_log)

Targets: `at_least={baseline label: ratio}` (throughput ratio), `min_rate=` (messages/s),
`min_gbps=` (1e9 bytes/s), `max_extra_seconds={baseline label: s}` (round time above the baseline's),
`at_most={extra_info key: limit}` and `recorded_at_least={extra_info key: minimum}` (a figure the test
records itself, e.g. memory growth, or a ratio it measured round by round against a baseline run beside it).
A seglog benchmark without targets is reported for information. The summary also prints each seglog
benchmark's ratio to every baseline of its group that no `at_least` target names, for information.

Throughput is `messages` (or `nbytes`) divided by the best (minimum) round time, and ratios compare the
best rounds of benchmarks of the same group: other processes on a shared machine only ever add time, and
they do not hit the baseline and the seglog benchmark alike, so the least disturbed round of each is the
fairest pair (`--seglog-stat=median` compares medians instead). At the end of the session the ratios
and verdicts (MET / MISSED) are written into each benchmark's `extra_info` before pytest-benchmark saves
its JSON, and printed after its tables.

First rounds: a benchmark run with `first_round=True` also times its first round on its own (the round
pedantic's warm-up would drop: a fresh producer, topic or reader, its first segment and first page faults
counted, as a user meets them), and the summary judges its targets on that round too, against the first
rounds of the group's baselines, which time theirs the same way.

Sizes: `scale(real, quick)` gives `quick` when benchmarks are disabled (`--benchmark-disable`: CI runs each
body once, so every file must finish in seconds), otherwise `real` times `--seglog-scale` (default 1).
"""

from __future__ import annotations

import copy
import gc
import math
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

ROUNDS = 7
WARMUP_ROUNDS = 1
FIRST_ROUND = "first round s"  # extra_info key: the first round's seconds (Bench.run's first_round)
VALUE_BYTES = 100


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--seglog-scale", type=float, default=1.0,
                     help="multiply the benchmark sizes of bench/ by this factor (default 1; e.g. 0.1 for a "
                          "quick look). Ignored with --benchmark-disable, which uses the small CI sizes.")
    parser.addoption("--seglog-stat", choices=("min", "median"), default="min",
                     help="the round time that throughputs and ratios of bench/ are computed from (default: "
                          "min, the least disturbed round)")


def benchmarks_disabled(config: pytest.Config) -> bool:
    return bool(config.getoption("benchmark_disable")) and not config.getoption("benchmark_enable")


class Scale:
    """`scale(real, quick)`: the size to use in this session (see the module docstring)."""

    def __init__(self, quick: bool, factor: float) -> None:
        self.quick = quick
        self.factor = factor

    def __call__(self, real: int, quick: int) -> int:
        return quick if self.quick else max(quick, int(real * self.factor))


@pytest.fixture(scope="session")
def scale(request: pytest.FixtureRequest) -> Scale:
    return Scale(benchmarks_disabled(request.config), request.config.getoption("seglog_scale"))


class Bench:
    """The `benchmark` fixture plus the group, role, work size and targets of one benchmark."""

    def __init__(self, benchmark: Any) -> None:
        self.benchmark = benchmark

    def baseline(self, group: str, label: str, *, messages: int | None = None, nbytes: int | None = None,
                 unit: str = "msg") -> Bench:
        return self._describe(group, label, "baseline", messages, nbytes, unit, {})

    def seglog(self, group: str, label: str, *, messages: int | None = None, nbytes: int | None = None,
               unit: str = "msg", at_least: dict[str, float] | None = None, min_rate: float | None = None,
               min_gbps: float | None = None, max_extra_seconds: dict[str, float] | None = None,
               at_most: dict[str, float] | None = None,
               recorded_at_least: dict[str, float] | None = None) -> Bench:
        targets = {"at_least": at_least, "min_rate": min_rate, "min_gbps": min_gbps,
                   "max_extra_seconds": max_extra_seconds, "at_most": at_most,
                   "recorded_at_least": recorded_at_least}
        return self._describe(group, label, "seglog", messages, nbytes, unit,
                              {k: v for k, v in targets.items() if v is not None})

    def _describe(self, group, label, role, messages, nbytes, unit, targets) -> Bench:
        self.benchmark.group = group
        info = self.benchmark.extra_info
        info.update(role=role, label=label, unit=unit)
        if messages is not None:
            info["messages"] = messages
        if nbytes is not None:
            info["bytes"] = nbytes
        if targets:
            info["targets"] = targets
        return self

    def run(self, function: Callable[..., Any], *, setup: Callable[[], Any] | None = None,
            teardown: Callable[..., Any] | None = None, rounds: int = ROUNDS,
            warmup_rounds: int = WARMUP_ROUNDS, first_round: bool = False) -> Any:
        """benchmark.pedantic: `setup` (untimed) returns the arguments of `function`, as a tuple, or None;
        `teardown` (untimed) gets the same arguments. With benchmarks disabled the body runs once, and so
        does `teardown` (pedantic would skip it, leaving files behind and its checks unchecked).

        `first_round`: the first round is timed on its own (after a garbage collection, untimed) and recorded
        as FIRST_ROUND (seconds), then pedantic runs with one warm-up round fewer (that round was one), so the
        rounds are the same."""
        def arguments():
            made = setup() if setup else None
            return (made if made is not None else ()), {}

        if self.benchmark.disabled:
            if teardown is not None:
                function, teardown = _with_teardown(function, teardown), None
        elif first_round:
            args, _ = arguments()
            # the garbage earlier work left (fixtures, tests before) collected first: a collection it owes
            # otherwise lands in the timed round (a fresh Log's first read of 1 M messages: 44-58 M msg/s
            # with one in it, 133 M without)
            gc.collect()
            started = time.perf_counter()
            function(*args)
            self.record(FIRST_ROUND, time.perf_counter() - started)
            if teardown is not None:
                teardown(*args)
            del args  # (a round's maps and views go before the next round's setup, as pedantic's do)
            warmup_rounds = max(0, warmup_rounds - 1)
        return self.benchmark.pedantic(function, setup=arguments, teardown=teardown, rounds=rounds,
                                       warmup_rounds=warmup_rounds)

    def record(self, key: str, value: Any) -> None:
        """A figure the test measured itself (saved in the JSON; `at_most` and `recorded_at_least` targets
        check it)."""
        self.benchmark.extra_info[key] = value

    def note(self, text: str) -> None:
        """A short remark printed under the benchmark in the summary (and saved in the JSON)."""
        self.record("note", text)


def _with_teardown(function: Callable[..., Any], teardown: Callable[..., Any]) -> Callable[..., Any]:
    def body(*args):
        try:
            return function(*args)
        finally:
            teardown(*args)
    return body


@pytest.fixture
def bench(benchmark: Any) -> Bench:
    return Bench(benchmark)


class Payload:
    """`n` random values of VALUE_BYTES bytes each, as a list of bytes and as a pyarrow binary array over
    one buffer (`raw`), plus the chunks a producer sends them in (one send_batch call per chunk)."""

    def __init__(self, n: int, chunk: int) -> None:
        self.n, self.value_bytes = n, VALUE_BYTES
        self.nbytes = n * VALUE_BYTES
        self.raw = np.random.default_rng(0x5E6).integers(0, 256, self.nbytes, dtype=np.uint8)
        self.values = [bytes(v) for v in self.raw.reshape(n, VALUE_BYTES)]
        offsets = np.arange(0, self.nbytes + 1, VALUE_BYTES, dtype=np.int32)
        self.arrow = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(self.raw)])
        self._split(chunk)

    def _split(self, chunk: int) -> None:
        self.chunk = chunk
        self.list_chunks = [self.values[i:i + chunk] for i in range(0, self.n, chunk)]
        self.arrow_chunks = [self.arrow.slice(i, chunk) for i in range(0, self.n, chunk)]

    def in_calls_of(self, chunk: int) -> Payload:
        """The same values sent `chunk` at a time (the values and buffers are shared, not copied)."""
        other = copy.copy(self)
        other._split(chunk)
        return other

    def group(self, name: str) -> str:
        """The benchmark group `name` at this call size, e.g. "append: python objects, 1,000 per call"."""
        return f"{name}, {self.chunk:,} per call"

    def __repr__(self) -> str:
        return f"{self.n:,} x {VALUE_BYTES} B values in chunks of {self.chunk:,}"


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest):
    """A directory for one module's data, deleted when the module is done: logs of a GiB or two must not
    pile up in the temporary directories pytest keeps from earlier sessions."""
    path = tmp_path_factory.mktemp(request.module.__name__)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def logs(scratch):
    """A folder of the module's scratch directory for the servers' logs."""
    path = scratch / "logs"
    path.mkdir()
    return path


@pytest.fixture(scope="session")
def payload(scale: Scale) -> Payload:
    """The messages of the append and read scenarios: 1M values of 100 B, sent in chunks of 64k (`calls`
    gives them in the other call sizes)."""
    return Payload(scale(1_000_000, 20_000), scale(65_536, 4_096))


# Messages per send_batch call (and per stored batch) of the append and read scenarios: a Pulsar client
# batch holds at most 1,000 messages (or 128 KiB), Kafka's default batch.size of 16 KiB about 160 of
# these; the first figures were measured with 64k. Not scaled: the call size is what is measured.
MESSAGES_PER_CALL = (1_000, 10_000, 65_536)


@pytest.fixture(scope="session", params=MESSAGES_PER_CALL, ids=["1k", "10k", "64k"])
def calls(request: pytest.FixtureRequest, payload: Payload) -> Payload:
    """The payload in calls of 1,000, 10,000 and 65,536 messages (fewer when the payload is smaller): each
    size its own group of benchmarks, with its baselines and the same targets."""
    return payload.in_calls_of(min(request.param, payload.n))


@pytest.fixture(scope="session")
def fill_topic(payload: Payload) -> Callable[[Any, int], Any]:
    """fill_topic(log, target_bytes): a topic "bench" holding at least that much payload (send_batch)."""
    return lambda log, target_bytes: _fill_topic(log, payload, target_bytes)


def _fill_topic(log: Any, payload: Payload, target_bytes: int) -> Any:
    topic = log.create_topic("bench")
    with topic.producer() as producer:
        written = 0
        while written < target_bytes:
            for chunk in payload.arrow_chunks:
                producer.send_batch(chunk)
            written += payload.nbytes
    return topic


# ---------------------------------------------------------------------------------------------------------
# Ratios and verdicts, computed once every benchmark has run.

@dataclass
class Entry:
    group: str
    label: str
    role: str
    seconds: float  # the round time compared: the minimum or the median, see --seglog-stat
    info: dict[str, Any]

    @property
    def rate(self) -> float | None:
        messages = self.info.get("messages")
        return messages / self.seconds if messages else None

    @property
    def gbps(self) -> float | None:
        nbytes = self.info.get("bytes")
        return nbytes / self.seconds / 1e9 if nbytes else None

    def speedup_over(self, baseline: Entry) -> float:
        """Throughput ratio (or time ratio when either side did not state its work)."""
        for mine, theirs in ((self.rate, baseline.rate), (self.gbps, baseline.gbps)):
            if mine and theirs:
                return mine / theirs
        return baseline.seconds / self.seconds


@dataclass
class Verdict:
    text: str           # e.g. "3.37x python loop (target >= 4x)"
    met: bool | None    # None: the baseline did not run


@dataclass
class GroupReport:
    name: str
    baselines: list[Entry] = field(default_factory=list)
    seglog: list[tuple[Entry, list[Verdict]]] = field(default_factory=list)


def evaluate(entry: Entry, baselines: dict[str, Entry]) -> list[Verdict]:
    """Check one seglog benchmark's targets; records ratios and verdicts in its extra_info."""
    targets = entry.info.get("targets", {})
    ratios = {label: round(entry.speedup_over(b), 3) for label, b in baselines.items()}
    verdicts: list[Verdict] = []
    for label, wanted in targets.get("at_least", {}).items():
        if label not in baselines:
            verdicts.append(Verdict(f"target >= {wanted:g}x {label}: baseline did not run", None))
            continue
        got = ratios[label]
        verdicts.append(Verdict(f"{got:.2f}x {label} (target >= {wanted:g}x)", got >= wanted))
    if "min_rate" in targets:
        wanted, got = targets["min_rate"], entry.rate or 0.0
        verdicts.append(Verdict(f"{_si(got)} {entry.info['unit']}/s (target >= {_si(wanted)}/s)", got >= wanted))
    if "min_gbps" in targets:
        wanted, got = targets["min_gbps"], entry.gbps or 0.0
        verdicts.append(Verdict(f"{got:.2f} GB/s (target >= {wanted:g} GB/s)", got >= wanted))
    for label, wanted in targets.get("max_extra_seconds", {}).items():
        if label not in baselines:
            verdicts.append(Verdict(f"target <= {wanted:g} s over {label}: baseline did not run", None))
            continue
        got = entry.seconds - baselines[label].seconds
        verdicts.append(Verdict(f"{got:.3f} s over {label} (target <= {wanted:g} s)", got <= wanted))
    for key, wanted in targets.get("at_most", {}).items():
        got = entry.info.get(key)
        verdicts.append(Verdict(f"{key} {got} (target <= {wanted:g})", got is not None and got <= wanted))
    for key, wanted in targets.get("recorded_at_least", {}).items():
        got = entry.info.get(key)
        verdicts.append(Verdict(f"{key} {got} (target >= {wanted:g})", got is not None and got >= wanted))
    first = _first_round(entry)
    if first is not None:
        verdicts += _first_round_verdicts(first, targets, baselines)
    entry.info["ratios"] = ratios
    entry.info["verdicts"] = {v.text: _verdict_word(v.met) for v in verdicts}
    return verdicts


def _first_round(entry: Entry) -> Entry | None:
    """The entry as its first round measured it (Bench.run's first_round), or None if it was not timed."""
    seconds = entry.info.get(FIRST_ROUND)
    return None if seconds is None else Entry(entry.group, entry.label, entry.role, seconds, entry.info)


def _first_round_verdicts(first: Entry, targets: dict[str, Any], baselines: dict[str, Entry]) -> list[Verdict]:
    """The targets judged on the first round, against the first rounds of the baselines that timed one;
    records those ratios in extra_info."""
    firsts = {label: b for label, b in ((label, _first_round(b)) for label, b in baselines.items()) if b}
    ratios = {label: round(first.speedup_over(b), 3) for label, b in firsts.items()}
    verdicts = [Verdict(f"first round: {ratios[label]:.2f}x {label}'s (target >= {wanted:g}x)",
                        ratios[label] >= wanted)
                for label, wanted in targets.get("at_least", {}).items() if label in firsts]
    if "min_rate" in targets:
        wanted, got = targets["min_rate"], first.rate or 0.0
        verdicts.append(Verdict(f"first round: {_si(got)} {first.info['unit']}/s (target >= {_si(wanted)}/s)",
                                got >= wanted))
    if "min_gbps" in targets:
        wanted, got = targets["min_gbps"], first.gbps or 0.0
        verdicts.append(Verdict(f"first round: {got:.2f} GB/s (target >= {wanted:g} GB/s)", got >= wanted))
    first.info["first round ratios"] = ratios
    return verdicts


def collect(benchmarks: list[Any], stat: str) -> list[GroupReport]:
    """Our benchmarks by group, each seglog one with its verdicts; also stores throughputs in extra_info."""
    entries: dict[str, list[Entry]] = {}
    for bench in benchmarks:
        info = bench.extra_info
        if "role" not in info or not bench.stats or bench.has_error:
            continue  # not one of ours (e.g. bench_page_faults.py), or it failed
        entry = Entry(bench.group, info["label"], info["role"], getattr(bench.stats, stat), info)
        info["compared"] = f"{stat} round"
        if entry.rate:
            info["msg/s"] = round(entry.rate)
        if entry.gbps:
            info["GB/s"] = round(entry.gbps, 3)
        first = _first_round(entry)
        if first is not None and first.rate:
            info["first round msg/s"] = round(first.rate)
        entries.setdefault(bench.group, []).append(entry)
    reports = []
    for group, members in entries.items():
        report = GroupReport(group, [e for e in members if e.role == "baseline"])
        by_label = {b.label: b for b in report.baselines}
        report.seglog = [(e, evaluate(e, by_label)) for e in members if e.role == "seglog"]
        reports.append(report)
    return reports


_REPORTS = pytest.StashKey[list]()
_COLOURS = {True: {"green": True}, False: {"red": True, "bold": True}, None: {"yellow": True}}


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int):
    # Runs before pytest-benchmark's own sessionfinish saves the JSON, so the ratios land in it.
    config = session.config
    bench_session = getattr(config, "_benchmarksession", None)
    if bench_session is not None and not bench_session.disabled:
        config.stash[_REPORTS] = collect(bench_session.benchmarks, config.getoption("seglog_stat"))
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_terminal_summary(terminalreporter: Any):
    # After pytest-benchmark's tables, and also when --benchmark-compare-fail makes them raise.
    try:
        return (yield)
    finally:
        write_summary(terminalreporter)


def write_summary(terminalreporter: Any) -> None:
    reports = terminalreporter.config.stash.get(_REPORTS, None)
    if not reports:
        return
    write = terminalreporter.write_line
    stat = terminalreporter.config.getoption("seglog_stat")
    terminalreporter.section(f"seglog vs baselines measured in this run ({stat} round)")
    tally = {True: 0, False: 0, None: 0}
    for report in reports:
        write("")
        write(report.name, bold=True)
        for entry in report.baselines:
            write(f"  baseline  {_figures(entry)}")
            _write_note(write, entry)
        for entry, verdicts in report.seglog:
            write(f"  seglog    {_figures(entry)}")
            for verdict in verdicts:
                tally[verdict.met] += 1
                write(f"{'':14}{verdict.text:<60} {_verdict_word(verdict.met)}", **_COLOURS[verdict.met])
            named = entry.info.get("targets", {}).get("at_least", {})
            for baseline in report.baselines:  # the ratios no target names, for information
                if baseline.label not in named:
                    write(f"{'':14}{_ratio_text(entry, baseline):<60} for information")
            _write_note(write, entry)
    write("")
    write(f"targets: {tally[True]} MET, {tally[False]} MISSED" +
          (f", {tally[None]} without baseline" if tally[None] else ""), bold=True)


def _figures(entry: Entry) -> str:
    parts = [f"{entry.label:<44}"]
    parts.append(f"{_si(entry.rate):>8} {entry.info['unit']}/s" if entry.rate else f"{entry.seconds:>9.4f} s")
    if entry.gbps:
        parts.append(f"{entry.gbps:7.3f} GB/s")
    first = _first_round(entry)
    if first is not None:
        parts.append(f"first round {_si(first.rate)} {entry.info['unit']}/s" if first.rate
                     else f"first round {first.seconds:.4f} s")
    return "  ".join(parts)


def _ratio_text(entry: Entry, baseline: Entry) -> str:
    text = f"{entry.speedup_over(baseline):.2f}x {baseline.label}"
    if not (entry.rate and baseline.rate) and not (entry.gbps and baseline.gbps):
        text += f" ({entry.seconds - baseline.seconds:+.3f} s)"
    return text


def _write_note(write: Callable[..., None], entry: Entry) -> None:
    if entry.info.get("note"):
        write(f"{'':14}({entry.info['note']})")


def _verdict_word(met: bool | None) -> str:
    return {True: "MET", False: "MISSED", None: "NO BASELINE"}[met]


def _si(value: float | None) -> str:
    if not value:
        return "0"
    exponent = min(int(math.log10(abs(value)) // 3), 3) if abs(value) >= 1 else 0
    return f"{value / 1000 ** exponent:.3g}{' kMG'[exponent].strip()}"
