"""`agentctl demo`: the whole product in one command on a throwaway embedded stack."""

from pathlib import Path

# The demo's files: the demo's session and, under `agentctl dev up`, every new session start
# with them (AGENT_WORKSPACE_SEED).
DEMO_WORKSPACE = Path(__file__).parent / "workspace"
