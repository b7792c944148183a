"""A tool's argument schema as a server can hold a reply to it (grammar tool mode).

The server turns the reply schema into a grammar before it decodes (llama.cpp:
common/json-schema.cpp, then json-schema-to-grammar.cpp). Tool schemas are untrusted (an MCP
server writes them), and one the converter refuses fails the whole request, every tool with
it; one that expands (``maxLength: 100000`` is a rule repeated 100,000 times, a hostile
regex a rule per state) costs the server its memory. So each schema is rebuilt here from a
small set of keywords the converter understands, bounded in depth, nodes and repetition:

- kept: type, properties, required, additionalProperties, items, prefixItems, enum, const,
  anyOf (oneOf becomes anyOf), allOf, small min/max counts, integer bounds, the formats
  the converter knows (date, time, date-time, uuid);
- inlined: ``$ref`` into the same document (``#/$defs/...``), so a schema embedded under
  the reply's root still resolves;
- dropped, which only loosens what the grammar allows: ``pattern`` (an invalid regex fails
  the request, a large one expands the grammar), counts over ``MAX_REPEAT``, unknown
  formats and keywords. The tool layer still validates every call against the tool's own
  schema, so a call the loosened grammar let through is answered with InvalidArguments;
- refused (the tool is left out, with the reason): a ``$ref`` outside the document or
  recursive, an unknown type, an empty enum or anyOf, a schema too deep or too large.

Pure functions, no I/O; nothing here raises on any input except ``Inexpressible``.
"""

from __future__ import annotations

import json
from typing import Any

_TYPES = frozenset({"string", "number", "integer", "boolean", "null", "object", "array"})
_FORMATS = frozenset({"date", "time", "date-time", "uuid"})
_COUNTS = ("minItems", "maxItems", "minLength", "maxLength")
_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
# A count above this is dropped: the grammar repeats a rule that many times.
MAX_REPEAT = 64
# The converter casts integer bounds to int64; past what a double holds exactly they go.
_MAX_BOUND = 2**53
MAX_DEPTH = 10
# Schema nodes of one tool, $ref targets counted each time they are inlined.
MAX_NODES = 400
MAX_ENUM = 128
MAX_ALTERNATIVES = 32
MAX_PROPERTIES = 64
MAX_NAME_CHARS = 128
# One tool's argument schema as the grammar holds it, in JSON characters.
MAX_SCHEMA_CHARS = 8_000
# A description shown to the model (prompt view only) is cut to this many characters.
MAX_PROPERTY_DESCRIPTION_CHARS = 200


class Inexpressible(ValueError):
    """A tool schema the grammar cannot hold; the message is the reason, in our words."""


def constrainable(parameters: object, *, descriptions: bool = False) -> dict[str, Any]:
    """The object schema the reply grammar holds for a tool with these ``parameters``.

    With ``descriptions`` the properties keep their (cut) descriptions: the view shown to
    the model in the prompt. Raises Inexpressible with the reason when it cannot be held.
    """
    if not isinstance(parameters, dict):
        raise Inexpressible("its parameters are not a JSON object")
    built = _Builder(parameters, descriptions).node(parameters, 0)
    if built.get("type") != "object" and "properties" not in built:
        raise Inexpressible("its parameters are not an object schema")
    size = len(json.dumps(built, ensure_ascii=False))
    if size > MAX_SCHEMA_CHARS:
        raise Inexpressible(f"its argument schema is {size} characters (limit {MAX_SCHEMA_CHARS})")
    return built


class _Builder:
    def __init__(self, root: dict[str, Any], descriptions: bool) -> None:
        self._root = root
        self._descriptions = descriptions
        self._nodes = 0
        self._resolving: set[str] = set()

    def node(self, schema: object, depth: int) -> dict[str, Any]:
        if schema is True:
            return {}
        if not isinstance(schema, dict):
            raise Inexpressible("a subschema is not an object")
        if depth > MAX_DEPTH:
            raise Inexpressible(f"it is nested deeper than {MAX_DEPTH} levels")
        self._nodes += 1
        if self._nodes > MAX_NODES:
            raise Inexpressible(f"it has more than {MAX_NODES} schema nodes")
        if "$ref" in schema:
            return self._ref(schema["$ref"], depth)
        for key in ("anyOf", "oneOf"):
            if key in schema:  # as the converter: alternatives first, their siblings unread
                return {"anyOf": self._alternatives(schema[key], key, depth)}
        out: dict[str, Any] = {}
        if self._descriptions and isinstance(schema.get("description"), str):
            out["description"] = schema["description"][:MAX_PROPERTY_DESCRIPTION_CHARS]
        if "type" in schema:
            out["type"] = _type(schema["type"])
        if "const" in schema:
            out["const"] = schema["const"]
        if "enum" in schema:
            out["enum"] = _enum(schema["enum"])
        if "allOf" in schema:
            out["allOf"] = self._alternatives(schema["allOf"], "allOf", depth)
        self._object(schema, out, depth)
        self._array(schema, out, depth)
        for key in _COUNTS:
            count = _number(schema.get(key))
            if isinstance(count, int) and 0 <= count <= MAX_REPEAT:
                out[key] = count
        for key in _BOUNDS:
            bound = _number(schema.get(key))
            if bound is not None and abs(bound) <= _MAX_BOUND:
                out[key] = bound
        if schema.get("format") in _FORMATS:
            out["format"] = schema["format"]
        return out

    def _object(self, schema: dict[str, Any], out: dict[str, Any], depth: int) -> None:
        properties = schema.get("properties")
        if properties is not None:
            if not isinstance(properties, dict):
                raise Inexpressible("its properties are not an object")
            if len(properties) > MAX_PROPERTIES:
                raise Inexpressible(f"an object has more than {MAX_PROPERTIES} properties")
            out["properties"] = {
                _property_name(name): self.node(value, depth + 1)
                for name, value in properties.items()
            }
        required = schema.get("required")
        if isinstance(required, list):
            named = [r for r in required if isinstance(r, str)]
            if named:
                out["required"] = named
        extra = schema.get("additionalProperties")
        if isinstance(extra, bool):
            out["additionalProperties"] = extra
        elif extra is not None:
            out["additionalProperties"] = self.node(extra, depth + 1)

    def _array(self, schema: dict[str, Any], out: dict[str, Any], depth: int) -> None:
        for key in ("items", "prefixItems"):
            items = schema.get(key)
            if items is None:
                continue
            if isinstance(items, list):
                if len(items) > MAX_ALTERNATIVES:
                    raise Inexpressible(f"a tuple has more than {MAX_ALTERNATIVES} items")
                out[key] = [self.node(item, depth + 1) for item in items]
            else:
                out[key] = self.node(items, depth + 1)

    def _alternatives(self, value: object, key: str, depth: int) -> list[dict[str, Any]]:
        if not isinstance(value, list) or not value:
            raise Inexpressible(f"its {key} is not a non-empty list")
        if len(value) > MAX_ALTERNATIVES:
            raise Inexpressible(f"its {key} has more than {MAX_ALTERNATIVES} alternatives")
        return [self.node(alternative, depth + 1) for alternative in value]

    def _ref(self, ref: object, depth: int) -> dict[str, Any]:
        if ref == "#":
            raise Inexpressible("it has a recursive $ref")
        if not isinstance(ref, str) or not ref.startswith("#/"):
            raise Inexpressible("it has a $ref outside its own schema")
        if ref in self._resolving:
            raise Inexpressible("it has a recursive $ref")
        target = _pointer(self._root, ref)
        self._resolving.add(ref)
        try:
            return self.node(target, depth + 1)
        finally:
            self._resolving.discard(ref)


def _pointer(root: dict[str, Any], ref: str) -> object:
    node: object = root
    for token in ref[2:].split("/"):
        key = token.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and key in node:
            node = node[key]
        elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        else:
            raise Inexpressible("it has a $ref that does not resolve")
    return node


def _type(value: object) -> str | list[str]:
    if isinstance(value, str) and value in _TYPES:
        return value
    if isinstance(value, list) and value and all(isinstance(t, str) and t in _TYPES for t in value):
        return list(value)
    raise Inexpressible("it has a type that is not a JSON Schema type")


def _enum(value: object) -> list[Any]:
    if not isinstance(value, list) or not value:
        raise Inexpressible("it has an enum that is not a non-empty list")
    if len(value) > MAX_ENUM:
        raise Inexpressible(f"it has an enum of more than {MAX_ENUM} values")
    return list(value)


def _property_name(name: str) -> str:
    if len(name) > MAX_NAME_CHARS:
        raise Inexpressible(f"a property name is longer than {MAX_NAME_CHARS} characters")
    return name


def _number(value: object) -> int | float | None:
    """A JSON number (True is an int to Python, not to JSON Schema)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value
