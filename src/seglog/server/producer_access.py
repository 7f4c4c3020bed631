"""Who produces to each topic partition over the wire, across connections: producer names (unique per
partition) and Pulsar's access modes (docs/SERVER.md, "Producer access modes"). A connection's own producers,
their sessions and SENDs, are producers.py's.

- Shared: any number of producers, unless one has the partition exclusively (then ProducerBusy).
- Exclusive: the only producer, refused with ProducerFenced while any other is connected.
- WaitForExclusive: the only producer, once every other has left; until then it waits in line (the
  client is told with PRODUCER_SUCCESS `producer_ready=false`).
- ExclusiveWithFencing: the only producer at once; the producers connected are fenced (closed by the server,
  and refused with ProducerFenced when they try again), and those waiting are refused.

Used from the event loop's thread only."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import count

from seglog.server.errors import ServerFailure
from seglog.server.protocol import pulsar_api_pb2 as api

SHARED, EXCLUSIVE, WAIT_FOR_EXCLUSIVE, EXCLUSIVE_WITH_FENCING = (
    api.Shared, api.Exclusive, api.WaitForExclusive, api.ExclusiveWithFencing)


@dataclass(eq=False)
class Waiter:
    """A WaitForExclusive producer in line: `granted` resolves when it has the partition alone (or fails
    with the ServerFailure that refuses it)."""
    name: str
    fence: Callable[[], None]
    granted: asyncio.Future[None] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


@dataclass
class _Partition:
    producers: dict[str, Callable[[], None]] = field(default_factory=dict)  # name -> how to fence it
    exclusive: str | None = None  # the producer that has the partition alone
    waiting: deque[Waiter] = field(default_factory=deque)


class ProducerRegistry:
    """The producers of each topic partition (keyed by whatever names the partition; `described` in
    errors), with their access modes."""

    def __init__(self, cluster: str) -> None:
        self._cluster = cluster
        self._partitions: dict[tuple[str, int], _Partition] = {}
        self._generated = count()

    def claim(self, key: tuple[str, int], described: str, requested: str | None, mode: int,
              fence: Callable[[], None]) -> str | Waiter:
        """Admit a producer named `requested` (a unique name is made for None) in access `mode`: its name,
        or a Waiter for a WaitForExclusive producer that must wait. `fence()` closes the producer if a later
        ExclusiveWithFencing producer takes the partition. ServerFailure (ProducerBusy, ProducerFenced) if it
        may not produce."""
        state = self._partitions.setdefault(key, _Partition())
        name = requested or self._generate(state)
        if name in state.producers or any(w.name == name for w in state.waiting):
            raise ServerFailure(api.ProducerBusy, f"producer {name!r} is already connected to topic {described}")
        if mode == SHARED:
            if state.exclusive is not None:
                raise ServerFailure(api.ProducerBusy, f"topic {described} has an exclusive producer "
                                                      f"({state.exclusive!r})")
        elif mode == EXCLUSIVE:
            if state.producers:
                raise ServerFailure(api.ProducerFenced, f"topic {described} has other producers "
                                                        f"({', '.join(sorted(state.producers))}); an Exclusive "
                                                        "producer must be the only one")
            state.exclusive = name
        elif mode == WAIT_FOR_EXCLUSIVE:
            if state.producers:
                waiter = Waiter(name, fence)
                state.waiting.append(waiter)
                return waiter
            state.exclusive = name
        elif mode == EXCLUSIVE_WITH_FENCING:
            self._fence_all(state, described, name)
            state.exclusive = name
        else:
            raise ServerFailure(api.NotAllowedError, f"producer access mode {mode} is not one of Shared (0), "
                                                     "Exclusive (1), WaitForExclusive (2), ExclusiveWithFencing (3)")
        state.producers[name] = fence
        return name

    def release(self, key: tuple[str, int], name: str) -> None:
        """A producer left (or a Waiter gave up): the first in line gets the partition once it is free."""
        state = self._partitions.get(key)
        if state is None:
            return
        state.producers.pop(name, None)
        if state.exclusive == name:
            state.exclusive = None
        state.waiting = deque(w for w in state.waiting if w.name != name)
        while not state.producers and state.waiting:
            waiter = state.waiting.popleft()
            if waiter.granted.done():  # (cancelled: the client closed or went away)
                continue
            state.producers[waiter.name] = waiter.fence
            state.exclusive = waiter.name
            waiter.granted.set_result(None)
        if not state.producers and not state.waiting:
            del self._partitions[key]

    def _fence_all(self, state: _Partition, described: str, fencer: str) -> None:
        fenced = list(state.producers.values())
        state.producers.clear()
        for waiter in state.waiting:
            if not waiter.granted.done():
                waiter.granted.set_exception(ServerFailure(
                    api.ProducerFenced, f"producer {fencer!r} took topic {described} with ExclusiveWithFencing"))
        state.waiting.clear()
        for fence in fenced:
            fence()

    def _generate(self, state: _Partition) -> str:
        while True:
            name = f"{self._cluster}-{next(self._generated)}"
            if name not in state.producers:
                return name
