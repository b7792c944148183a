"""Whether a tool's JSON schema may be sent with ``strict: true`` (OpenAI's Structured
Outputs for function calls), which makes the server constrain the call's arguments to the
schema while it decodes: a malformed or off-schema call cannot come back.

Strict mode accepts only a subset of JSON Schema: every object closed
(``additionalProperties: false``) with all of its properties required, and no keyword outside
the ones it documents. A schema outside that subset is refused by the API (HTTP 400) rather
than loosened, so only schemas that are wholly inside it are marked; the rest go as they are
and their calls are checked by the tool layer (InvalidArguments, UnknownTool) as on servers
that constrain nothing. The list below is deliberately narrower than what the API accepts.
"""

from __future__ import annotations

from typing import Any

# Keywords strict mode documents and whose meaning does not depend on the model leaving a
# property out (``default`` does: it is refused).
_KEYWORDS = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "description",
        "title",
        "enum",
        "const",
        "items",
        "anyOf",
        "minItems",
        "maxItems",
        "minimum",
        "maximum",
        "pattern",
    }
)
# Deeper than this is not a tool's argument list; such a schema is simply not marked.
_MAX_DEPTH = 8


def strict_compatible(schema: dict[str, Any]) -> bool:
    """True when ``schema`` (a tool's parameters) is an object schema strict mode accepts
    unchanged."""
    return schema.get("type") == "object" and _fits(schema, 0)


def _fits(node: object, depth: int) -> bool:
    if depth > _MAX_DEPTH or not isinstance(node, dict):
        return False
    if not set(node) <= _KEYWORDS:
        return False
    if node.get("type") == "object" or "properties" in node:
        properties = node.get("properties")
        if not isinstance(properties, dict) or node.get("additionalProperties") is not False:
            return False
        required = node.get("required", [])
        if not isinstance(required, list) or set(required) != set(properties):
            return False
        if not all(_fits(p, depth + 1) for p in properties.values()):
            return False
    if "items" in node and not _fits(node["items"], depth + 1):
        return False
    alternatives = node.get("anyOf", [])
    return isinstance(alternatives, list) and all(_fits(a, depth + 1) for a in alternatives)
