"""Agents written for other SDKs on our storage: the claim check and its plugin, and
AgentState as their session store."""
