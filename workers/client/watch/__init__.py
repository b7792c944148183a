"""Following a session as it commits, read from AgentState or through the gateway's event
stream, and printed one way."""
