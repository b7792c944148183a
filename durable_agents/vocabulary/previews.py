"""The short text an item keeps in place of a full result: its preview.

No imports of ours and no I/O, so the workflow contracts can name PREVIEW_CHARS without
pulling the storage stack into the workflow sandbox.
"""

from __future__ import annotations

PREVIEW_CHARS = 500


def bounded(text: str, limit: int = PREVIEW_CHARS) -> str:
    """`text` cut to at most `limit` characters, the cut marked with an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def make_preview(content: bytes, content_type: str, limit: int = PREVIEW_CHARS) -> str:
    """The preview of a stored result: its text, bounded; a one-line note for binary data.

    Text with a NUL is binary here: PostgreSQL's text and jsonb types refuse U+0000, and a
    preview that cannot be committed failed the step with the content in the error."""
    text: str | None
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is None or "\x00" in text:
        return f"[binary {content_type}, {len(content)} bytes]"
    return bounded(text, limit)


# How the text of every tool result that is an error begins.
ERROR_PREFIX = "error ("


def error_preview(error_type: str, message: str) -> str:
    """The text of a tool result that is an error: the model reads the type and the words."""
    return f"{ERROR_PREFIX}{error_type}): {message}"[:PREVIEW_CHARS]
