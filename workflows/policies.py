"""Task queues, timeouts and retry policies: named once, used everywhere."""

from __future__ import annotations

from datetime import timedelta

from temporalio.common import RetryPolicy

CLOUD_TASK_QUEUE = "agent-cloud"
WORKFLOW_ID_PREFIX = "agent-"

# Business errors that retrying cannot fix; every activity raises them with these types.
# Only the state writes' policy lists them (open_session stages its task text outside
# storage_errors_are_final). call_model and run_tool raise each of them as a non-retryable
# ApplicationError themselves (their whole bodies run in storage_errors_are_final; tools'
# own errors become results or ToolRaised), so their policies leave the list out: it was
# ~115 bytes in each of the two ActivityTaskScheduled events of every step.
NON_RETRYABLE_ERROR_TYPES = [
    "ModelRequestRejected",
    "ModelAuthError",
    "SessionNotFound",
    "ToolCallNotFound",
    "UnknownTool",
    "ArtifactIntegrityError",
]

MODEL_CALL_TIMEOUT = timedelta(minutes=5)
# The model activity heartbeats while it waits on the provider: a worker that dies mid-call
# is noticed in seconds, not after the whole start-to-close timeout.
MODEL_HEARTBEAT_TIMEOUT = timedelta(seconds=20)
# A provider outage lasts as long as it lasts: model calls retry without an attempt limit,
# bounded by the task's outage deadline (schedule-to-close) instead. Any other error still
# stops after MODEL_OTHER_ERROR_ATTEMPTS (activities/model_wait.py makes it final then).
MODEL_OTHER_ERROR_ATTEMPTS = 8


def model_retry(max_interval: timedelta) -> RetryPolicy:
    """The model calls' retry policy: capped exponential backoff, no attempt limit."""
    return RetryPolicy(
        initial_interval=min(timedelta(seconds=1), max_interval),
        backoff_coefficient=2.0,
        maximum_interval=max_interval,
        maximum_attempts=0,
    )


TOOL_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=6,
)

# State writes take milliseconds; a short timeout is how fast a lost worker's write retries.
STATE_WRITE_TIMEOUT = timedelta(seconds=10)
STATE_WRITE_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=500),
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=20,
    non_retryable_error_types=NON_RETRYABLE_ERROR_TYPES,
)

# A task text a plain Temporal client puts in the start input: the start event holds it
# once; a longer task goes through start_task, which stores it as an artifact.
MAX_INLINE_TASK_BYTES = 32 * 1024


def device_task_queue(tenant_id: str, device_id: str) -> str:
    """A device's own queue. Its identity is (tenant, device id): neither id may contain
    ':', so two tenants' devices of the same name can never share a queue."""
    return f"device:{tenant_id}:{device_id}"


def workflow_id_for(session_id: str) -> str:
    return f"{WORKFLOW_ID_PREFIX}{session_id}"


def step_key(workflow_id: str, step: int, suffix: str) -> str:
    """The idempotency key of something the loop does at `step` (its model call "model", a
    tool call by its id, a status write "status:..."): stable across retries, worker
    crashes, replay and continue-as-new, as it names no time and no randomness."""
    return f"{workflow_id}:{step}:{suffix}"
