"""Which topics a read reads: the option `topic` (one), `topics` (a comma-separated list) or `topicsPattern` (a
regex over one namespace's topics), exactly one of them, as Spark's Kafka source takes exactly one of `assign`,
`subscribe` and `subscribePattern`.

Topics are named as given: the rows' topic column, the offsets JSON and Spark's checkpointed offsets use the
names the options wrote. A pattern names what it matches in the form it is written in: 'events-.*' (a bare
pattern, over public/default, as a bare topic name means a topic of public/default) gives bare names such as
'events-eu'; 'acme/iot/events-.*' gives 'acme/iot/events-eu'; 'persistent://acme/iot/events-.*' gives
'persistent://acme/iot/events-eu'. The regex is matched against the whole topic name (Python's re.fullmatch),
as Kafka's subscribePattern is (Java's Pattern.matcher(topic).matches())."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from seglog.errors import InvalidArgumentError

OPTIONS = ("topic", "topics", "topicsPattern")
_PERSISTENT = "persistent://"


@dataclass(frozen=True)
class TopicSelection:
    """The topics a read selects (`option` is the option that selected them, which errors name)."""
    option: str
    names: tuple[str, ...] = ()  # topic, topics: the names as given
    pattern: str | None = None  # topicsPattern: the regex over the topic names of `namespace`
    namespace: str = "public/default"
    prefix: str = ""  # what the pattern wrote before its regex: the matched names are given with it

    @classmethod
    def parse(cls, given: Mapping[str, str]) -> TopicSelection:
        """From the options by lower-case name: exactly one of topic, topics and topicsPattern."""
        named = [option for option in OPTIONS if given.get(option.lower()) is not None]
        if len(named) != 1:
            raise InvalidArgumentError(" / ".join(named) if named else "topic", None if not named else
                                       ", ".join(f"{o}={given[o.lower()]!r}" for o in named),
                                       "exactly one of the options topic (a topic), topics (topics separated by "
                                       "commas) and topicsPattern (a regex over a namespace's topics)")
        option, text = named[0], given[named[0].lower()].strip()
        if option == "topic":
            if not text:
                raise InvalidArgumentError("topic", text, "a topic: 'name' or 'tenant/namespace/name'")
            return cls(option, (text,))
        if option == "topics":
            names = tuple(dict.fromkeys(name.strip() for name in text.split(",") if name.strip()))
            if not names:
                raise InvalidArgumentError("topics", text, "topics separated by commas, such as 'a,b' or "
                                           "'a,tenant/namespace/b'")
            return cls(option, names)
        return cls._of_pattern(text)

    @classmethod
    def _of_pattern(cls, text: str) -> TopicSelection:
        accepted = ("a regex over the topics of public/default ('events-.*'), or over those of another namespace "
                    "written before it ('tenant/namespace/events-.*', optionally after 'persistent://')")
        path = text.removeprefix(_PERSISTENT)
        parts = path.split("/", 2)
        if len(parts) == 2 or (len(parts) == 1 and path != text) or not parts[-1]:
            raise InvalidArgumentError("topicsPattern", text, accepted)
        try:
            re.compile(parts[-1])
        except re.error as error:
            raise InvalidArgumentError("topicsPattern", text, f"{accepted}; the regex does not compile: "
                                       f"{error}") from None
        if len(parts) == 1:
            return cls("topicsPattern", pattern=parts[0])
        return cls("topicsPattern", pattern=parts[2], namespace=f"{parts[0]}/{parts[1]}",
                   prefix=text[:len(text) - len(parts[2])])

    @property
    def single(self) -> str | None:
        """The one topic named by topic or topics; None for several, or a pattern."""
        return self.names[0] if self.pattern is None and len(self.names) == 1 else None

    def resolve(self, admin: Any) -> list[str]:
        """The topics selected now, sorted: those named (each must exist: the first read of its offsets says
        which does not), or those of the pattern's namespace that the pattern matches."""
        if self.pattern is None:
            return sorted(self.names)
        namespace = self.namespace + "/"
        local = (name[len(namespace):] for name in admin.topics.list() if name.startswith(namespace))
        return sorted(self.prefix + name for name in local if re.fullmatch(self.pattern, name))

    def selects(self, name: str) -> bool:
        """Whether `name` (as this selection names topics) is one it selects, whether or not it exists now."""
        if self.pattern is None:
            return name in self.names
        return name.startswith(self.prefix) and re.fullmatch(self.pattern, name[len(self.prefix):]) is not None

    @property
    def text(self) -> str:
        """The option's value (trimmed)."""
        return self.prefix + self.pattern if self.pattern is not None else ",".join(self.names)

    def describe(self) -> str:
        """The option and its value, for messages."""
        return f"{self.option} {self.text!r}"
