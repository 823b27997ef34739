"""The types every provider shares: the provider names, a request, a reply and the two errors.

A provider module (`offline`, `openai`, `anthropic`) imports these from here, never from the
package: the package's registry imports the provider modules on first use, so nothing is circular.
"""

from dataclasses import dataclass, field
from enum import StrEnum


class Provider(StrEnum):
    """The LLM providers (the one list: validation, the registry, defaults)."""

    OFFLINE = "offline"
    OPENAI = "openai"
    ANTHROPIC = "anthropic"


# The providers that speak to a model through its SDK, and the environment variable of its key,
# in the order the default provider is chosen.
SDK_KEYS = {Provider.OPENAI: "OPENAI_API_KEY", Provider.ANTHROPIC: "ANTHROPIC_API_KEY"}


class Purpose(StrEnum):
    """What a call is for (the offline provider answers by it; sent as a header too)."""

    AGENT = "agent"
    PLAN = "plan"
    SYNTHESIS = "synthesis"
    JUDGE = "judge"


@dataclass
class LLMRequest:
    system: str
    prompt: str
    model: str
    temperature: float | None = None
    max_tokens: int = 1024
    # time.monotonic() by which the call must be over, retries included.
    deadline: float | None = None
    # What the call is for (a Purpose): the offline provider uses it, and it is sent as a header
    # so a test server can tell the calls apart.
    purpose: str = Purpose.AGENT
    # The agent's name in the session (sent as a header too).
    label: str = ""
    # Structured facts for the offline provider only (e.g. the specialists of a plan).
    hints: dict = field(default_factory=dict)


@dataclass
class LLMReply:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    attempts: int = 1
    provider: str = ""
    model: str = ""

    @property
    def tokens_used(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class ProviderError(Exception):
    """The call failed for good (after the SDK's own retries); the message is safe to show."""


class ProviderTimeout(ProviderError):
    """The agent's time ran out."""
