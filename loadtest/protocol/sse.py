"""A sans-IO parser for Server-Sent Events: bytes in, events out, no sockets, no asyncio.

It follows the WHATWG event-stream rules that matter for LLM streaming: lines end in
``\\n``, ``\\r\\n`` or ``\\r`` (even when the two bytes of ``\\r\\n`` arrive in different
reads), multi-line ``data`` fields are joined with ``\\n``, comment lines (keep-alives)
are counted and skipped, ``event:`` names the event type (``error`` included) and an
event is dispatched at a blank line. Data stays as ``bytes`` because the next step,
``orjson.loads``, takes bytes directly; decoding first would cost a copy per chunk.

Memory is bounded: a line or an event longer than ``max_event_bytes`` raises
``ProtocolError`` instead of buffering whatever a broken server keeps sending.
"""

from __future__ import annotations

from typing import NamedTuple

from loadtest.errors import ProtocolError

__all__ = ["DEFAULT_MAX_EVENT_BYTES", "Event", "SSEParser"]

DEFAULT_MAX_EVENT_BYTES = 1 << 20
"""1 MiB: far above any real chunk (a few hundred bytes), far below trouble."""

_COLON = 58  # ord(":")
_DONE_EVENT = b"data: [DONE]\n\n"
_NL = 10  # ord("\n")
_LONG = 1024
"""A line this long is cut out with ``find`` rather than ``split`` (see ``feed``)."""


class Event(NamedTuple):
    """One dispatched server-sent event.

    A named tuple, not a frozen dataclass: one is made per token chunk, and a tuple is
    built faster (a frozen dataclass sets each field through ``object.__setattr__``;
    docs/benchmarks.md)."""

    data: bytes
    """The data lines of the event, joined with ``\\n``."""
    event: str = "message"
    """The event type; ``message`` unless an ``event:`` field said otherwise."""
    id: str | None = None
    """The last event id seen on the stream, if any."""


class SSEParser:
    """Incremental event-stream parser; feed it bytes as they arrive."""

    __slots__ = (
        "_data",
        "_data_bytes",
        "_event",
        "_held",
        "_last_id",
        "_parts",
        "_pending_cr",
        "comments",
        "lines",
        "max_event_bytes",
        "retry_ms",
    )

    def __init__(self, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        self.max_event_bytes = max_event_bytes
        """The longest line or event accepted; longer raises ``ProtocolError``."""
        # The unfinished line, as the reads that brought it: joined once, when its end
        # comes (joining on every read would copy a long line once per read).
        self._parts: list[bytes | memoryview] = []
        self._held = 0
        self._data: list[bytes] = []
        self._data_bytes = 0
        self._event = ""
        self._last_id: str | None = None
        self._pending_cr = False
        self.comments = 0
        """Comment lines seen so far (servers send them as keep-alives)."""
        self.lines = 0
        """Complete lines seen so far, blank ones included."""
        self.retry_ms: int | None = None
        """The last ``retry:`` value the server sent, if any."""

    def feed(self, chunk: bytes) -> list[Event]:
        """Consume ``chunk`` and return the events it completed, in order."""
        if not chunk:
            # Nothing to do, and a CR that ended the last chunk must still swallow the
            # LF that may start the next one.
            return []
        if self._pending_cr:
            self._pending_cr = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        if b"\r" in chunk:
            # A trailing CR may be the first half of CRLF: end the line now and drop a
            # leading LF from the next read. (The held line has no CR left in it.)
            self._pending_cr = chunk.endswith(b"\r")
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        # find and rfind scan with memchr; split walks byte by byte, which for a 256 KB
        # line cost as much as parsing its JSON: it only gets reads of short lines.
        first = chunk.find(b"\n")
        if first < 0:
            self._hold(chunk)
            return []
        tail: bytes | memoryview
        if first < _LONG and not self._parts:
            lines = chunk.split(b"\n")
            tail = lines.pop()
        else:
            # Views, not copies: a long line's pieces are copied once, by the join.
            view = memoryview(chunk)
            end = chunk.rfind(b"\n")
            tail = view[end + 1 :]
            if self._parts:
                self._parts.append(view[:first])
                lines = [b"".join(self._parts)]
                self._parts = []
                self._held = 0
                if first < end:
                    lines += _lines(chunk, first + 1, end)
            else:
                lines = _lines(chunk, 0, end)
        if tail:
            self._hold(tail)
        events: list[Event] = []
        self.lines += len(lines)
        for line in lines:
            if not line:
                if self._data:
                    events.append(
                        Event(
                            b"\n".join(self._data) if len(self._data) > 1 else self._data[0],
                            self._event or "message",
                            self._last_id,
                        )
                    )
                    self._data = []
                    self._data_bytes = 0
                self._event = ""
            elif line[0] == _COLON:
                self.comments += 1
            else:
                self._field(line)
        return events

    def feed_json(self, chunk: bytes) -> tuple[list[Event], bytes, int, list[Event]]:
        """Like ``feed``, for a reader that decodes JSON lines in one call.

        Returns ``(before, body, count, after)``, in stream order. Where every whole
        event of a read is one ``data:`` line (what LLM servers send), their values are
        ``body``, joined by newlines (newline-delimited JSON), ``count`` of them, and no
        ``Event`` is made for them. ``before``: the end of an event an earlier read
        began; ``after``: the end mark and whatever else follows (an unfinished line is
        held). Any other read is all ``feed``'s: ``(feed(chunk), b"", 0, [])``.
        """
        before: list[Event] = []
        if self.pending or self._event or self._pending_cr or b"\r" in chunk:
            # Finish the event held from an earlier read, then look at the rest.
            cut = chunk.find(b"\n\n") + 2
            if cut < 2 or b"\r" in chunk or self._pending_cr:
                return self.feed(chunk), b"", 0, []
            before = self.feed(chunk[:cut])
            if self.pending or self._event:
                return before + self.feed(chunk[cut:]), b"", 0, []
            chunk = chunk[cut:]
        # rfind of one byte is memrchr; of two bytes a byte-by-byte search, paid on every
        # read of a long line that had no blank line yet (docs/benchmarks.md).
        nl = chunk.rfind(b"\n")
        if nl < 1:
            return before + self.feed(chunk), b"", 0, []
        end = nl + 1 if chunk[nl - 1] == _NL else chunk.rfind(b"\n\n", 0, nl) + 2
        n = chunk.count(b"\n\ndata: ", 0, end) + 1
        if (
            end < 2
            or not chunk.startswith(b"data: ")
            or chunk.count(b"\n", 0, end) != 2 * n  # some block is not one data line
            or chunk.startswith(_DONE_EVENT)  # the end mark is no JSON
            or (  # an event over the limit: feed raises the error it deserves
                end > self.max_event_bytes
                and max(map(len, chunk[:end].split(b"\n\n"))) - 5 > self.max_event_bytes
            )
        ):
            return before + self.feed(chunk), b"", 0, []
        stop = end - len(_DONE_EVENT) if chunk.endswith(_DONE_EVENT, 0, end) else end
        if stop < end:
            n -= 1
        self.lines += 2 * n
        body = chunk[6 : stop - 2].replace(b"\n\ndata: ", b"\n")
        return before, body, n, self.feed(chunk[stop:]) if stop < len(chunk) else []

    def _hold(self, part: bytes | memoryview) -> None:
        self._held += len(part)
        if self._held > self.max_event_bytes:
            self._parts = []
            self._held = 0
            raise ProtocolError(
                f"an event-stream line exceeds {self.max_event_bytes} bytes without ending"
            )
        self._parts.append(part)

    def _field(self, line: bytes) -> None:
        if line.startswith(b"data: "):
            name, value = b"data", line[6:]  # the usual line: one copy of the value
        else:
            name, colon, value = line.partition(b":")
            if colon and value[:1] == b" ":
                value = value[1:]
        if name == b"data":
            self._data_bytes += len(value) + 1
            if self._data_bytes > self.max_event_bytes:
                self._data, self._data_bytes = [], 0
                raise ProtocolError(f"an event's data exceeds {self.max_event_bytes} bytes")
            self._data.append(value)
        elif name == b"event":
            self._event = value.decode("utf-8", "replace")
        elif name == b"id":
            if b"\0" not in value:
                self._last_id = value.decode("utf-8", "replace")
        elif name == b"retry" and value.isdigit():
            self.retry_ms = int(value)
        # Unknown fields are ignored, as the standard says.

    @property
    def held_bytes(self) -> int:
        """Bytes of the unfinished line held (never more than ``max_event_bytes``)."""
        return self._held

    @property
    def pending(self) -> bool:
        """True when bytes of an unfinished event are buffered (a truncated stream)."""
        return bool(self._parts) or bool(self._data)


def _lines(chunk: bytes, start: int, end: int) -> list[bytes]:
    """The lines of ``chunk[start:end + 1]`` (which ends with a line end), without it.

    Long lines are cut out by ``find`` (memchr); a run of short ones goes to ``split``
    as soon as one turns up, since a Python loop per line would cost more there.
    """
    out = []
    pos = start
    while pos <= end:
        nl = chunk.find(b"\n", pos)
        if nl - pos < _LONG:
            out += chunk[pos:end].split(b"\n")
            break
        out.append(chunk[pos:nl])
        pos = nl + 1
    return out
