"""The task service and the command layer every door goes through: start, steer and read a
task, as a tenant, checked once."""
