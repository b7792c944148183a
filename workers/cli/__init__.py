"""agentctl: the command line, one module per command group."""
