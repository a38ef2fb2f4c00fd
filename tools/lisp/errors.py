"""The one exception the Lisp bridge raises (docs/lisp.md#errors)."""

from __future__ import annotations


class LispError(Exception):
    """A reader, macro or compile error.

    ``message`` is the reference's (in-tree) Display text, e.g.
    ``compile error in :suspended: duplicate keyword``. When the error can be tied to
    a place in the source, ``position`` is its UTF-8 byte offset and ``line`` /
    ``column`` are 1-based (column counted in characters); otherwise all three are
    ``None``. ``str(err)`` is the message followed by ``(line L, column C)``.
    """

    def __init__(
        self,
        message: str,
        *,
        position: int | None = None,
        line: int | None = None,
        column: int | None = None,
    ) -> None:
        self.message = message
        self.position = position
        self.line = line
        self.column = column
        super().__init__(message)

    def __str__(self) -> str:
        if self.line is None:
            return self.message
        return f"{self.message} (line {self.line}, column {self.column})"


class SourceMap:
    """Turns a character index into the source into (byte offset, line, column).

    With ``src=None`` (data that did not come from one text) errors are unlocated.
    """

    def __init__(self, src: str | None) -> None:
        self._src = src

    def locate(self, index: int) -> tuple[int, int, int]:
        """Return ``(byte offset, 1-based line, 1-based column)`` of character ``index``."""
        before = (self._src or "")[:index]
        line = before.count("\n") + 1
        column = index - (before.rfind("\n") + 1) + 1
        return len(before.encode("utf-8")), line, column

    def error(self, message: str, index: int | None) -> LispError:
        """Build a :class:`LispError` located at character ``index`` (``None``: unlocated)."""
        if index is None or index < 0 or self._src is None:
            return LispError(message)
        position, line, column = self.locate(index)
        return LispError(message, position=position, line=line, column=column)
