"""Why a run stops before its model's answer: the exceptions the runner acts on."""


class LeaseLost(Exception):
    """Another worker took the run over (this one was too slow to renew): stop at once."""


class AgentPaused(Exception):
    """A human paused the agent while its run was under way: stop before the next model call."""


class WaitForHeadroom(Exception):
    """A model call did not fit only because calls under way hold its budgets' money: the run
    waits for them to settle rather than fail."""


class AgentMadeExternal(Exception):
    """The agent was made external while its run was under way ("we run it ourselves now"):
    stop before the next model call, and end the run, its tasks left as they are."""
