"""Runs one collaborative session on a Celery worker: agents, hierarchical plan, synthesis.

Why threads inside the session task rather than a chord or one Celery task per agent: chords on
Redis have open hang bugs (celery#4207, #5229), and a fan-out with a DB-counted join still needs
a second place for timeouts and max_parallel. Here one task owns the session: a bounded pool of
`max_parallel` threads runs the agents, the session thread enforces each agent's timeout, and
every step is written so that a re-delivered task (acks_late, the worker died) resumes:

- each agent has one Contribution row (unique per session and agent), claimed with a conditional
  UPDATE pending → running and settled with running → final; a finished one is never run again,
  and a late answer of an agent already marked timed out is discarded by the same condition;
- a re-delivery puts back to pending only the agents that were running when the worker died;
- a lease (token + heartbeat) keeps a second copy from running a session another worker is
  still running (it backs off and retries).

Where each part is:

- `session.py`   run_session, the entry point: claim, run the mode, synthesize, finish;
- `lease.py`     claim and lease (the row lock, the token, the heartbeat, resuming);
- `pool.py`      the process-wide pool of agent threads and their database connections;
- `batch.py`     a batch of agents under max_parallel and the agent timeout;
- `agent.py`     running one agent: claim its contribution, ask its provider, settle it once;
- `acting.py`    an agent given tools: its tool loop, as whom it acts, its turns recorded;
- `modes/`       the modes (parallel, sequential, hierarchical), a registry keyed by `Mode`;
- `plan.py`      the hierarchical coordinator's plan;
- `finish.py`    synthesis through the strategy registry, and the session's outcome.
"""

from .lease import BUSY, CLAIMED, FINISHED, MISSING
from .pool import close_thread_connections
from .session import run_session

__all__ = ["BUSY", "CLAIMED", "FINISHED", "MISSING", "close_thread_connections", "run_session"]
