"""The leaf vocabulary every layer may import: artifact refs, item kinds, session statuses,
previews and token counting. It imports nothing of ours."""
