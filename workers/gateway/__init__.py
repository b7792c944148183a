"""The gateway: the authenticated front door (REST, Server-Sent Events) to tasks."""
