"""Model providers behind one interface; provider SDK objects never leave this package."""

from durable_agents.activities.providers.base import (
    ChatMessage,
    ModelProvider,
    ModelReply,
    ModelRequest,
    ProviderCall,
    ToolSpec,
    Usage,
)

__all__ = [
    "ChatMessage",
    "ModelProvider",
    "ModelReply",
    "ModelRequest",
    "ProviderCall",
    "ToolSpec",
    "Usage",
]
