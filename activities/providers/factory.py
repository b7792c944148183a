"""Build the configured ModelProvider from the model settings.

Providers are imported lazily: a worker pays only for the SDK it uses, and the offline and
scripted providers are only loaded when asked for by name.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from pydantic import SecretStr

from durable_agents.activities.providers.base import ModelProvider

if TYPE_CHECKING:  # the OpenAI SDK loads only when that provider is chosen
    from durable_agents.activities.providers.openai_compat import (
        AssistantToolContent,
        MaxTokensField,
        StrictTools,
    )
    from durable_agents.activities.providers.tool_grammar import ToolMode

_CHOICES = "openai|anthropic|offline|scripted"


class ProviderSettings(Protocol):
    """What build_provider reads: workers.settings.ModelSettings has this shape (activities
    never import the workers' settings; the worker passes its own in)."""

    @property
    def provider(self) -> str | None: ...
    @property
    def name(self) -> str: ...
    @property
    def base_url(self) -> str | None: ...
    @property
    def api_key(self) -> SecretStr | None: ...
    @property
    def timeout_seconds(self) -> float: ...
    @property
    def script_path(self) -> Path | None: ...
    @property
    def max_tokens_field(self) -> MaxTokensField: ...
    @property
    def assistant_tool_content(self) -> AssistantToolContent: ...
    @property
    def strict_tools(self) -> StrictTools: ...
    @property
    def tool_mode(self) -> ToolMode: ...
    @property
    def temperature(self) -> float | None: ...
    @property
    def offline_piece_seconds(self) -> float: ...


def build_provider(settings: ProviderSettings) -> ModelProvider:
    """Return the provider named by ``settings.provider`` (MODEL_PROVIDER).

    Raises ValueError when no provider is configured, or when the chosen one lacks what it
    needs. There is no default: the offline model must be chosen on purpose, never by accident.
    """
    api_key = settings.api_key.get_secret_value() if settings.api_key is not None else None
    if settings.tool_mode == "grammar" and settings.provider != "openai":
        raise ValueError(
            "MODEL_TOOL_MODE=grammar is for MODEL_PROVIDER=openai (OpenAI-compatible servers); "
            f"{settings.provider or 'no provider'} calls tools natively: use auto or native."
        )
    if settings.temperature is not None and settings.provider != "openai":
        raise ValueError(
            "MODEL_TEMPERATURE is for MODEL_PROVIDER=openai (OpenAI-compatible servers); "
            f"{settings.provider or 'no provider'} takes no temperature: leave it unset."
        )
    match settings.provider:
        case None:
            raise ValueError(
                f"No model provider configured: set MODEL_PROVIDER to one of {_CHOICES} "
                "(offline is a deterministic stand-in model for demos and tests)."
            )
        case "openai":
            if not settings.base_url and not api_key:
                raise ValueError(
                    "MODEL_PROVIDER=openai needs MODEL_API_KEY (for api.openai.com) or "
                    "MODEL_BASE_URL (for an OpenAI-compatible server)."
                )
            from durable_agents.activities.providers.openai_compat import OpenAICompatibleProvider

            return OpenAICompatibleProvider(
                base_url=settings.base_url,
                api_key=api_key,
                model=settings.name,
                timeout=settings.timeout_seconds,
                max_tokens_field=settings.max_tokens_field,
                assistant_tool_content=settings.assistant_tool_content,
                strict_tools=settings.strict_tools,
                tool_mode=settings.tool_mode,
                temperature=settings.temperature,
            )
        case "anthropic":
            if not api_key:
                raise ValueError("MODEL_PROVIDER=anthropic needs MODEL_API_KEY.")
            from durable_agents.activities.providers.anthropic_provider import AnthropicProvider

            return AnthropicProvider(
                api_key=api_key,
                model=settings.name,
                timeout=settings.timeout_seconds,
                base_url=settings.base_url,
            )
        case "offline":
            from durable_agents.activities.providers.offline import OfflineProvider

            return OfflineProvider(settings.offline_piece_seconds)
        case "scripted":
            if settings.script_path is None:
                raise ValueError("MODEL_PROVIDER=scripted needs MODEL_SCRIPT_PATH.")
            from durable_agents.activities.providers.scripted import ScriptedProvider

            return ScriptedProvider.from_file(settings.script_path)
    raise ValueError(f"Unknown MODEL_PROVIDER {settings.provider!r}: use one of {_CHOICES}.")
