"""Built-in tools. Each receives a ToolContext carrying its idempotency key."""
