"""The data keys that mark an item for what the loop wrote it as, spelled once: a failed
check's user turn, a nudge's, and a failed or repeated call's result. No I/O here."""

from __future__ import annotations

# A failed check's item: data {CHECK_KEY: CHECK_FAILED, "reason": ..., "step": ...},
# counted for the check's attempts.
CHECK_KEY = "check"
CHECK_FAILED = "failed"
# Set (True) on a failed check's item when the check judged the workspace alone: it stands
# until a tool has changed the workspace, whatever the model answers meanwhile.
CHECK_STANDS_KEY = "stands"
# A nudge's item: data {NUDGE_KEY: the NonAnswer code, "step": ...}.
NUDGE_KEY = "nudge"
# A failed call's result: data {FAILED_CALL_KEY: the call's fingerprint}, to count repeats.
FAILED_CALL_KEY = "failed_call"
# Set on a workspace read's result that repeated one of the reads just before it, the same
# tool and result (activities/repeated_calls.py): the sha256 of the result it repeated.
REPEATS_KEY = "repeats"
