"""Departments: LiveKit Agent subclasses built from registered Department specs."""
