"""A JSON Schema (2020-12) validator whose regular expressions run on RE2.

A tool's schema can come from an MCP server, which is untrusted, and the value it is
matched against from whoever approves: with the backtracking `re` that jsonschema uses, a
pattern such as `^(a+)+$` would stall the gateway's event loop. Here `pattern`,
`patternProperties` and the `additionalProperties` they affect match in linear time
(activities.policies.linear_regex); a pattern RE2 cannot take is not checked here (the tool checks
its arguments again when it runs) rather than refusing an edit for the schema's fault.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from jsonschema import Draft202012Validator, ValidationError, validators

from durable_agents.activities.policies.linear_regex import RegexRefused, compile_linear


def _search(pattern: str, text: str) -> bool | None:
    """Whether `pattern` matches in `text`; None when RE2 cannot take the pattern."""
    try:
        return bool(compile_linear(pattern).search(text))
    except RegexRefused:
        return None


def _pattern(
    validator: Any, pattern: str, instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and _search(pattern, instance) is False:
        yield ValidationError(f"does not match {pattern!r}")


def _pattern_properties(
    validator: Any, patterns: dict[str, Any], instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for name, value in instance.items():
            if _search(pattern, name):
                yield from validator.descend(value, subschema, path=name, schema_path=pattern)


def extra_properties(instance: dict[str, Any], schema: dict[str, Any]) -> list[str]:
    """The names in `instance` that neither `properties` nor `patternProperties` declare."""
    declared = schema.get("properties") or {}
    patterns = schema.get("patternProperties") or {}
    return [
        name
        for name in instance
        if name not in declared
        # A pattern RE2 cannot take counts as matching: not our place to refuse the name.
        and not any(_search(p, name) is not False for p in patterns)
    ]


def _additional_properties(
    validator: Any, allowed: Any, instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    extras = extra_properties(instance, schema)
    if validator.is_type(allowed, "object"):
        for name in extras:
            yield from validator.descend(instance[name], allowed, path=name)
    elif allowed is False and extras:
        yield ValidationError("additional properties are not allowed")


# jsonschema's extend() is untyped; what it returns is a Draft202012Validator class.
LinearValidator: Any = validators.extend(  # type: ignore[no-untyped-call]
    Draft202012Validator,
    {
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _additional_properties,
    },
)
