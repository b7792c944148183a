"""httpx logs every request's full URL at INFO. The device PUTs each result to a presigned
URL, whose query is a bearer credential (anyone holding it may write the object until it
expires): on the httpx logger, every URL's query is dropped before a record is emitted, at
any level and whoever configured the handlers; the path, the object's key, stays."""

from __future__ import annotations

import logging
import re

# A URL's query: after its scheme, host and path, up to the next space, quote or fragment.
_QUERY = re.compile(r"(\b[a-z][a-z0-9+.-]*://[^\s?#\"'<>]+)\?[^\s#\"'<>]*", re.IGNORECASE)
LOGGER = "httpx"


class _QueriesDropped(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        kept = _QUERY.sub(r"\1?…", message)
        if kept != message:
            record.msg, record.args = kept, None
        return True


_FILTER = _QueriesDropped()


def drop_url_queries() -> None:
    """Install the filter on the httpx logger (once, however often called)."""
    logging.getLogger(LOGGER).addFilter(_FILTER)
