"""How a download presents an artifact's bytes to a browser: never as active content.

An artifact's content type is what a tool or a device said it was (a fetched page's
`text/html`, a device's declared type), so it is untrusted. Served as-is, an HTML or SVG
result runs its script on the origin that serves it: the object store's, which every
tenant's downloads share, or the gateway's, where the web page keeps its key. So every
download names its own type and disposition instead: text of any kind is shown as
`text/plain` (HTML shows its source), raster images as themselves (a browser only draws
them), everything else is an attachment of bytes, saved, never opened in the tab.

Browsers never sniff `text/plain` or an image type up to HTML, so this holds even where
the server sends no `X-Content-Type-Options: nosniff` (a presigned store URL cannot add
headers; the gateway adds it and a sandboxing CSP on top).
"""

from __future__ import annotations

from dataclasses import dataclass

TEXT_TYPE = "text/plain; charset=utf-8"
BYTES_TYPE = "application/octet-stream"

# Drawn by a browser as an image document: no markup, no script (SVG is XML, so text).
_IMAGES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp", "image/avif"})
# Text that is not text/*: shown as text rather than saved.
_TEXT_APPLICATIONS = frozenset(
    {
        "application/json",
        "application/xml",
        "application/javascript",
        "application/ecmascript",
        "application/x-javascript",
        "application/yaml",
        "application/x-yaml",
        "application/toml",
        "application/x-sh",
        "application/sql",
    }
)


@dataclass(frozen=True)
class DownloadHeaders:
    """The Content-Type and Content-Disposition a download of an artifact is served with."""

    content_type: str
    disposition: str


def _media(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


def download_headers(content_type: str, sha256: str) -> DownloadHeaders:
    """The headers to serve an artifact stored as `content_type` with (its sha256 names an
    attachment's file)."""
    media = _media(content_type)
    if (
        media.startswith("text/")
        or media in _TEXT_APPLICATIONS
        or media.endswith(("+json", "+xml"))
    ):
        return DownloadHeaders(TEXT_TYPE, "inline")
    if media in _IMAGES:
        return DownloadHeaders(media, "inline")
    return DownloadHeaders(BYTES_TYPE, f'attachment; filename="artifact-{sha256[:16]}"')
