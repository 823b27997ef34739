"""Runs in the admin: a record a human can read, and the runs on the task and agent pages."""

from .pages import AgentAdminWithRuns, HeldWakesFilter, TaskAdminWithRuns, held_wakes_exist
from .runs import RunAdmin

__all__ = [
    "AgentAdminWithRuns",
    "HeldWakesFilter",
    "RunAdmin",
    "TaskAdminWithRuns",
    "held_wakes_exist",
]
