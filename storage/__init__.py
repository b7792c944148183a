"""AgentState (SQLAlchemy 2 async, PostgreSQL) and the content-addressed ArtifactStore (S3)."""
