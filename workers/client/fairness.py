"""Tenants share the task queue fairly: every task is started with its tenant as the
Temporal fairness key, which its activities and sub-agents inherit, so the matching service
hands out a backlog's tasks round-robin across tenants rather than first come, first served
(one tenant's flood waits its turn instead of holding every worker slot).

The server must have fairness on (the dev stack starts it so, workers/stack/temporal.py; a
self-hosted server sets `matching.enableFairness`, docs/DEPLOY.md); a server without it
takes the key and dispatches in order.
"""

from __future__ import annotations

import hashlib

from temporalio.common import Priority

# The server refuses a longer fairness key; a tenant id may be up to 129 characters.
MAX_FAIRNESS_KEY_BYTES = 64


def tenant_priority(tenant_id: str) -> Priority:
    """The priority a task of `tenant_id` starts with: the tenant as its fairness key, or,
    for a tenant id too long to be one, its sha256 (distinct tenants keep distinct keys)."""
    key = tenant_id
    if len(key.encode()) > MAX_FAIRNESS_KEY_BYTES:
        key = "sha256:" + hashlib.sha256(key.encode()).hexdigest()[:48]
    return Priority(fairness_key=key)
