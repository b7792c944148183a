"""The worker processes: what a cloud or device worker registers and runs, and how it is
forked, traced, sandboxed and checked before a deploy."""
