"""billing's Alembic versions folder (its own branch, ``branch_labels = ("billing",)``).

A package only so that it ships in the wheel; Alembic skips ``__init__.py`` when it reads the
revisions here.
"""
