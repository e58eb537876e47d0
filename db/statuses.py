"""A task's statuses, apart from the models so that reading them imports no SQLAlchemy."""

STATUSES = ("queued", "running", "succeeded", "failed", "cancelled")
FINISHED = ("succeeded", "failed", "cancelled")
