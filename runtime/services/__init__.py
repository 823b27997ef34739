"""Writes of the runtime: wake a managed agent, resume it, record and finish a run, sweep.

One module per concern; callers import from here."""

from .bounds import AGENT_TALK_WINDOW, COMMENT, Cause
from .dispatch import MANAGER_PRIORITY, REPORT_PRIORITY, held_for_budget, run_priority
from .finish import (
    MADE_EXTERNAL,
    WAITING_FOR_HEADROOM,
    run_finish,
    run_hand_back,
    run_wait_for_headroom,
)
from .record import Recorded, run_record_turn, run_record_turns
from .release import held_wakes, run_release
from .resume import run_resume, unseen_since_assigned, wake_after_budget
from .sweep import ALWAYS_MANAGED, sweep_runs
from .wake import current_run, run_wake

__all__ = [
    "AGENT_TALK_WINDOW",
    "ALWAYS_MANAGED",
    "COMMENT",
    "MADE_EXTERNAL",
    "MANAGER_PRIORITY",
    "REPORT_PRIORITY",
    "WAITING_FOR_HEADROOM",
    "Cause",
    "Recorded",
    "current_run",
    "held_for_budget",
    "held_wakes",
    "run_finish",
    "run_hand_back",
    "run_priority",
    "run_record_turn",
    "run_record_turns",
    "run_release",
    "run_resume",
    "run_wait_for_headroom",
    "run_wake",
    "sweep_runs",
    "unseen_since_assigned",
    "wake_after_budget",
]
