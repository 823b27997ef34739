"""The agent: its fixed handle, its settings as an LLM worker, and the checks that keep them valid."""

from django.apps import apps
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models

from infrastructure.prepared import quoted_in_json_text

from ..history import audited
from ..remote_a2a import validate_card_url
from ..webhooks import validate_webhook_url
from .expertise import validate_expertise
from .organizations import Organization, Team

HANDLE_VALIDATOR = RegexValidator(
    r"^[a-z0-9][a-z0-9-]*$",
    "Use lowercase letters, digits and hyphens, starting with a letter or digit (e.g. agent-sarah).",
)


class AgentStatus(models.TextChoices):
    IDLE = "idle"
    ACTIVE = "active"
    BUSY = "busy"
    OFFLINE = "offline"


class AgentRuntime(models.TextChoices):
    """Who runs the agent (issue 11 §2): `external` calls us over REST, call-tool or MCP;
    `managed` is woken by the runtime app when work reaches it, and driven with its LLM settings;
    `a2a` is a remote A2A agent its work is sent to (runtime/remote_a2a.py)."""

    EXTERNAL = "external"
    MANAGED = "managed"
    A2A = "a2a", "remote A2A agent"


# A managed agent's model calls per run (issue 11 §2: 8 by default).
DEFAULT_MAX_TURNS = 8
MAX_TURNS_LIMIT = 50
ALLOWED_TOOLS_MAX_ITEMS = 100


def validate_allowed_tools(value) -> None:
    """The allow-list's shape: null (every tool of the registry) or a list of distinct names.
    Whether each name is a tool is the registry's to say (the admin form and the runtime)."""
    if value is None:
        return
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ValidationError("Allowed tools must be a list of tool names (or empty for all).")
    if len(value) > ALLOWED_TOOLS_MAX_ITEMS or len(set(value)) != len(value):
        raise ValidationError(f"At most {ALLOWED_TOOLS_MAX_ITEMS} tool names, each listed once.")


# The environment variables a remote A2A agent's token may come from: only those named for it,
# so that no one editing an agent can have another secret of the service (SECRET_KEY, a
# database URL, an LLM key) sent as a bearer token to a server of their choosing.
TOKEN_ENV_PREFIX = "A2A_TOKEN_"
TOKEN_ENV_VALIDATOR = RegexValidator(
    rf"^{TOKEN_ENV_PREFIX}[A-Z0-9_]+$",
    f"The name of an environment variable starting with {TOKEN_ENV_PREFIX}, in capitals, "
    f"digits and underscores (e.g. {TOKEN_ENV_PREFIX}BILLING).",
)
# The variables are the install's, shared by its organizations: only a superuser (who sets them
# on the workers) names one, or an organization's staff could have another's token sent out.
TOKEN_ENV_SUPERUSER_ONLY = (
    "Only a superuser names the token's environment variable: the A2A_TOKEN_… variables are "
    "the install's, shared by its organizations."
)


def handle_is_fixed_message(handle: str) -> str:
    return (
        f"An agent's id cannot change: {handle} is its identity in its tasks' audit trail "
        "(their delegation chains). To use another id, create a new agent."
    )


def former_handle_message(handle: str) -> str:
    return (
        f"{handle} was the id of a former agent and stays in its tasks' audit trail: "
        "choose another id."
    )


def named_in_delegation_chain(handle: str) -> models.Q:
    """Tasks whose delegation chain names `handle` (the quoted handle in the chain's JSON text:
    handles are quote-free), for the tasks app's visibility and `handle_of_former_agent` alike.

    With a condition the match implies, which an index reads (`quoted_in_json_text`): a trigram
    index on the chain's text served it badly, every handle sharing most of its trigrams (`age`,
    `gen`, `nt-`, `000`), ~60 ms at a million tasks."""
    return models.Q(delegation_chain__icontains=f'"{handle}"') & quoted_in_json_text(
        "delegation_chain", handle
    )


def handle_of_former_agent(*, organization_id: int, handle: str) -> bool:
    """True if `handle` is in a delegation chain of the organization's tasks but no agent holds it:
    a former agent's id, which a new agent must not take (it would see those tasks). The Task
    model is reached through the apps registry: `organization` imports no app above it.
    """
    task = apps.get_model("tasks", "Task")
    current = Agent.objects.filter(organization_id=organization_id, handle=handle)
    return (
        task._default_manager.filter(
            named_in_delegation_chain(handle), organization_id=organization_id
        )
        .filter(~models.Exists(current))
        .exists()
    )


class Agent(models.Model):
    """An LLM agent of the organization. `handle` (`agent-sarah`) is its public id, fixed once saved.

    `clean()` and `save()` refuse a changed handle or a former agent's; `QuerySet.update()` and
    the bulk writes go around them, so code using those keeps to these rules itself.
    """

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="agents")
    handle = models.CharField(
        "id", max_length=100, validators=[HANDLE_VALIDATOR], help_text="e.g. agent-sarah"
    )
    name = models.CharField(max_length=200)
    role = models.CharField("job title", max_length=200, blank=True)
    team = models.ForeignKey(
        Team, null=True, blank=True, on_delete=models.SET_NULL, related_name="agents"
    )
    senior = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="reports",
        help_text="Who this agent reports to (its seniorId).",
    )
    expertise = models.JSONField(
        default=list,
        blank=True,
        validators=[validate_expertise],
        help_text='Exact, case-sensitive terms, e.g. ["PostgreSQL", "React"].',
    )
    is_paused = models.BooleanField("paused", default=False)
    workload_capacity = models.PositiveSmallIntegerField(default=5)
    system_prompt = models.TextField("custom system prompt", blank=True)
    availability_until = models.DateTimeField(null=True, blank=True)
    worktree_path = models.CharField(max_length=500, null=True, blank=True)
    # Seed 002's runtime status as the agent (or its hook) last reported it: "pending" (idle) or
    # "processing" (busy); empty means never reported, which reads as busy, the safe default.
    runtime_status = models.CharField(max_length=20, blank=True, editable=False)
    runtime_status_at = models.DateTimeField(null=True, blank=True, editable=False)
    webhook_url = models.URLField(blank=True)
    # LLM settings for collaboration sessions; API keys live in the environment only.
    llm_provider = models.CharField(max_length=20, blank=True)
    llm_model = models.CharField(max_length=100, blank=True)
    llm_temperature = models.FloatField(null=True, blank=True)
    llm_max_tokens = models.PositiveIntegerField(null=True, blank=True)
    # Issue 11 §2: a managed agent is run by us (the runtime app) with the LLM settings above.
    runtime = models.CharField(
        max_length=10,
        choices=AgentRuntime.choices,
        default=AgentRuntime.EXTERNAL,
        help_text="external: the agent calls us. managed: we run it with its LLM settings, "
        "woken when work reaches it. remote A2A agent: its tasks are sent to the A2A agent of "
        "the card URL below.",
    )
    # A remote A2A agent, known by its card; its bearer token stays in the
    # environment (the variable's name only is stored).
    a2a_card_url = models.URLField(
        "A2A card URL",
        max_length=500,
        blank=True,
        help_text="A remote A2A agent's card, e.g. https://agents.example.com/.well-known/"
        "agent-card.json: fetched and checked when saved; its skills become the expertise.",
    )
    a2a_token_env = models.CharField(
        "A2A token variable",
        max_length=100,
        blank=True,
        validators=[TOKEN_ENV_VALIDATOR],
        help_text="Optional: the environment variable holding the remote agent's bearer token, "
        "named A2A_TOKEN_… (never the token itself).",
    )
    # The card as last fetched, and when: what requests are built from (refreshed when stale).
    a2a_card = models.JSONField(null=True, blank=True, editable=False)
    a2a_card_fetched_at = models.DateTimeField(null=True, blank=True, editable=False)
    max_turns = models.PositiveSmallIntegerField(
        default=DEFAULT_MAX_TURNS,
        validators=[MinValueValidator(1), MaxValueValidator(MAX_TURNS_LIMIT)],
        help_text="A managed agent's model calls per run; past them its task is blocked.",
    )
    allowed_tools = models.JSONField(
        null=True,
        blank=True,
        default=None,
        validators=[validate_allowed_tools],
        help_text="The tools a managed agent is offered; empty: every tool of the registry.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    # Who changed what (organization/history.py); the runtime status is reported, not configured.
    # The remote card is fetched, not configured.
    history = audited(
        "agent",
        exclude=["runtime_status", "runtime_status_at", "a2a_card", "a2a_card_fetched_at"],
    )

    class Meta:
        ordering = ["handle"]
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "handle"], name="agent_handle_unique_in_org"
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.handle})"

    def save(self, *args, **kwargs):
        # The one guard of every path that saves (clean() is the forms'): a changed handle, or
        # a former agent's for a new one, is refused before anything is written.
        update_fields = kwargs.get("update_fields")
        if "handle" in self.__dict__ and (update_fields is None or "handle" in update_fields):
            errors = self.handle_errors(kwargs.get("using"))
            if errors:
                raise ValidationError({"handle": errors})
        super().save(*args, **kwargs)
        if "handle" in self.__dict__:
            self._stored_handle = self.handle
        self._checked_new_handle = None

    # --- the handle is fixed ------------------------------------------------------------------

    # The handle as stored, once read or saved; None while unknown (never saved nor read, or
    # read with the handle deferred): a stored handle is never null.
    _stored_handle: str | None = None
    # (organization_id, handle) that `clean()` found free of a former agent's tasks: `save()`
    # does not ask again for the same insert.
    _checked_new_handle = None

    @classmethod
    def from_db(cls, db, field_names, values):
        instance = super().from_db(db, field_names, values)
        # __dict__, not getattr: a deferred handle is not read (that would cost a query).
        instance._stored_handle = instance.__dict__.get("handle")
        return instance

    def refresh_from_db(self, using=None, fields=None, from_queryset=None):
        super().refresh_from_db(using=using, fields=fields, from_queryset=from_queryset)
        if (fields is None or "handle" in fields) and "handle" in self.__dict__:
            self._stored_handle = self.handle

    def _handle_in_database(self, using=None):
        """The handle stored for this agent's row (None: no row), as read, else one query."""
        if self._stored_handle is not None and not self._state.adding:
            return self._stored_handle
        if self.pk is None:
            return None
        manager = type(self)._base_manager.using(using or self._state.db or "default")
        return manager.filter(pk=self.pk).values_list("handle", flat=True).first()

    def handle_errors(self, using=None) -> list[str]:
        """Why this agent may not be saved with its handle: changed, or a former agent's."""
        handle = self.__dict__.get("handle")
        if not handle:
            return []
        if self.pk is not None:
            stored = self._handle_in_database(using)
            if stored is not None:
                return [] if stored == handle else [handle_is_fixed_message(stored)]
        if not self.organization_id or self._checked_new_handle == (self.organization_id, handle):
            return []
        if handle_of_former_agent(organization_id=self.organization_id, handle=handle):
            return [former_handle_message(handle)]
        self._checked_new_handle = (self.organization_id, handle)
        return []

    def clean(self) -> None:
        errors = {}
        handle_errors = self.handle_errors()
        if handle_errors:
            errors["handle"] = handle_errors
        if self.team_id and self.team.organization_id != self.organization_id:
            errors["team"] = "The team must belong to the agent's organization."
        if self.senior_id:
            if self.senior.organization_id != self.organization_id:
                errors["senior"] = "The senior must belong to the agent's organization."
            elif self.senior_chain_has_cycle():
                errors["senior"] = "This senior would create a cycle in the reporting line."
        try:
            validate_webhook_url(self.webhook_url)
        except ValidationError as exc:
            errors["webhook_url"] = exc.messages
        if self.runtime == AgentRuntime.A2A and not self.a2a_card_url:
            errors["a2a_card_url"] = "A remote A2A agent needs the URL of its agent card."
        elif self.a2a_card_url:
            try:
                validate_card_url(self.a2a_card_url)
            except ValidationError as exc:
                errors["a2a_card_url"] = exc.messages
        if errors:
            raise ValidationError(errors)

    @property
    def is_managed(self) -> bool:
        return self.runtime == AgentRuntime.MANAGED

    @property
    def is_remote_a2a(self) -> bool:
        return self.runtime == AgentRuntime.A2A

    def senior_chain_has_cycle(self) -> bool:
        """True if following seniors from this agent's senior leads back to this agent."""
        seen = {self.pk} if self.pk else set()
        current = self.senior
        while current is not None:
            if current.pk in seen or current is self:
                return True
            seen.add(current.pk)
            current = current.senior
        return False
