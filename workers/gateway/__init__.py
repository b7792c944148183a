"""The gateway: the authenticated HTTP front door to tasks (`agentctl gateway`): REST
and Server-Sent Events. The app is `workers.gateway.app.create_app`; this package file
imports nothing, so that a module of the package (e.g. `events`) does not load FastAPI."""
