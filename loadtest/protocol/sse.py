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

from dataclasses import dataclass

from loadtest.errors import ProtocolError

__all__ = ["DEFAULT_MAX_EVENT_BYTES", "Event", "SSEParser"]

DEFAULT_MAX_EVENT_BYTES = 1 << 20
"""1 MiB: far above any real chunk (a few hundred bytes), far below trouble."""

_COLON = 58  # ord(":")


@dataclass(frozen=True, slots=True)
class Event:
    """One dispatched server-sent event."""

    data: bytes
    """The data lines of the event, joined with ``\\n``."""
    event: str = "message"
    """The event type; ``message`` unless an ``event:`` field said otherwise."""
    id: str | None = None
    """The last event id seen on the stream, if any."""


class SSEParser:
    """Incremental event-stream parser; feed it bytes as they arrive."""

    __slots__ = (
        "_buf",
        "_data",
        "_data_bytes",
        "_event",
        "_last_id",
        "_pending_cr",
        "comments",
        "lines",
        "max_event_bytes",
        "retry_ms",
    )

    def __init__(self, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        self.max_event_bytes = max_event_bytes
        """The longest line or event accepted; longer raises ``ProtocolError``."""
        self._buf = b""
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
        buf = self._buf + chunk if self._buf else chunk
        if b"\r" in buf:
            # A trailing CR may be the first half of CRLF: end the line now and drop a
            # leading LF from the next read.
            self._pending_cr = buf.endswith(b"\r")
            buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = buf.split(b"\n")
        self._buf = lines.pop()
        if len(self._buf) > self.max_event_bytes:
            self._buf = b""
            raise ProtocolError(
                f"an event-stream line exceeds {self.max_event_bytes} bytes without ending"
            )
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

    def _field(self, line: bytes) -> None:
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
    def pending(self) -> bool:
        """True when bytes of an unfinished event are buffered (a truncated stream)."""
        return bool(self._buf) or bool(self._data)
