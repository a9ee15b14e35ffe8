"""Capped capture of a command's output: keep the head and the tail, say how much was cut.

Bytes that are not UTF-8 (a name a command made, binary output) come out as `\\xNN`
(`overture.sandbox.printable`), as file names do in every tool response."""

from __future__ import annotations

import asyncio

from overture.sandbox.printable import decode_text

CHUNK = 65536


class CappedOutput:
    """Collects a byte stream, keeping at most `limit` bytes: the first half and the last half."""

    def __init__(self, limit: int) -> None:
        self.head_limit = limit - limit // 2
        self.tail_limit = limit // 2
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data and self.tail_limit:
            self.tail += data
            if len(self.tail) > 2 * self.tail_limit:  # trim in batches, not on every chunk
                del self.tail[: len(self.tail) - self.tail_limit]

    @property
    def cut(self) -> int:
        """Bytes dropped from the middle."""
        return self.total - len(self.head) - min(len(self.tail), self.tail_limit)

    def text(self) -> str:
        tail = bytes(self.tail[-self.tail_limit :]) if self.tail_limit else b""
        if self.cut <= 0:
            return decode_text(bytes(self.head) + tail)
        return f"{decode_text(bytes(self.head))}\n[... {self.cut} bytes cut ...]\n{decode_text(tail)}"

    async def drain(self, stream: asyncio.StreamReader) -> None:
        """Read `stream` to its end, keeping what the cap allows."""
        while chunk := await stream.read(CHUNK):
            self.feed(chunk)
