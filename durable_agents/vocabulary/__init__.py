"""The leaf vocabulary every layer may import: artifact refs, item kinds, session statuses,
non-answer codes, previews and token counting. It imports nothing of ours."""
