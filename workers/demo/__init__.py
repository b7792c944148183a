"""`agentctl demo`: the whole product in one command on a throwaway embedded stack."""
