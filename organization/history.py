"""Who changed what: django-simple-history rows carrying the actor, the tenant and the label.

One line audits a model: `history = audited("budget")` (then `makemigrations`); writes that
bypass `save()` call `record_changes(objs)`. Nothing here imports the models at module level.
"""

import contextvars
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.core.exceptions import ObjectDoesNotExist
from django.db import models
from simple_history.models import HistoricalRecords
from simple_history.signals import pre_create_historical_record

# kind (the feed's `model`) → the historical model of each audited model, filled as they load.
AUDITED: dict[str, type[models.Model]] = {}


# --- who -------------------------------------------------------------------------------------


class ActorKind(models.TextChoices):
    USER = "user", "User"
    AGENT = "agent", "Agent"
    ORGANIZATION_KEY = "organization_key", "Organization key"
    SYSTEM = "system", "System"


@dataclass(frozen=True)
class Actor:
    kind: str
    label: str
    key_prefix: str = ""
    user: object | None = None


SYSTEM = Actor(ActorKind.SYSTEM, "system")

_acting: contextvars.ContextVar[Actor | None] = contextvars.ContextVar("audit_actor", default=None)


def actor_of_caller(caller) -> Actor:
    """The actor of an `organization.caller.Caller`: its key, its user, or its agent."""
    key = caller.api_key
    if key is not None and key.agent_id is not None:
        return Actor(ActorKind.AGENT, caller.agent.handle, key.prefix)
    if key is not None:
        return Actor(ActorKind.ORGANIZATION_KEY, key.name or key.prefix, key.prefix)
    if caller.user is not None:
        return Actor(ActorKind.USER, caller.user.get_username(), user=caller.user)
    if caller.agent is not None:
        return Actor(ActorKind.AGENT, caller.agent.handle)
    return SYSTEM


def actor_of_request(request) -> Actor | None:
    """The actor of an authenticated request: DRF puts an API key's `KeyUser` on the Django
    request it wraps, so the middleware's request carries the key once DRF has checked it."""
    user = getattr(request, "user", None)
    # organization.auth.KeyUser (not imported: auth imports the models, which import this).
    key = getattr(user, "api_key", None)
    if key is not None:
        if key.agent_id is not None:
            return Actor(ActorKind.AGENT, key.agent.handle, key.prefix)
        return Actor(ActorKind.ORGANIZATION_KEY, key.name or key.prefix, key.prefix)
    if user is not None and getattr(user, "is_authenticated", False):
        return Actor(ActorKind.USER, user.get_username(), user=user)
    return None


def current_actor() -> Actor:
    """Who is changing things now: `acting_as`, else the request in hand, else the system."""
    actor = _acting.get()
    if actor is not None:
        return actor
    request = getattr(HistoricalRecords.context, "request", None)
    if request is not None:
        actor = actor_of_request(request)
    return actor or SYSTEM


@contextmanager
def acting_as(caller):
    """Record the changes made inside as `caller`'s (a tool call that did not come as a request)."""
    token = _acting.set(actor_of_caller(caller))
    try:
        yield
    finally:
        _acting.reset(token)


def _history_user(instance=None, request=None, **kwargs):
    """simple-history's `history_user`: a human only (an API key is not a User row)."""
    user = current_actor().user
    return user if isinstance(user, get_user_model()) else None


# --- the rows ---------------------------------------------------------------------------------


class AuditedHistory(models.Model):
    """The columns every audited model's historical rows have beside simple-history's own."""

    history_organization_id = models.BigIntegerField(null=True, editable=False)
    history_object_label = models.CharField(max_length=300, blank=True, editable=False)
    history_actor_kind = models.CharField(
        max_length=20, choices=ActorKind.choices, default=ActorKind.SYSTEM, editable=False
    )
    history_actor_label = models.CharField(max_length=200, blank=True, editable=False)
    history_actor_key_prefix = models.CharField(max_length=16, blank=True, editable=False)

    class Meta:
        abstract = True

    @property
    def actor_display(self) -> str:
        if self.history_actor_kind == ActorKind.SYSTEM:
            return "system"
        return f"{self.get_history_actor_kind_display()}: {self.history_actor_label}"


def _organization_id(obj) -> int | None:
    return obj.organization_id


def _no_special_action(row, before) -> None:
    return None


class AuditedRecords(HistoricalRecords):
    """HistoricalRecords whose rows carry the actor, the organization and the object's label."""

    def __init__(
        self,
        kind: str,
        organization: Callable = _organization_id,
        action: Callable | None = None,
        **kwargs,
    ):
        self.kind = kind
        self.organization_of = organization
        self.action = action or _no_special_action
        kwargs.setdefault("bases", [AuditedHistory])
        kwargs.setdefault("get_user", _history_user)
        super().__init__(**kwargs)

    def get_meta_options(self, model):
        options = super().get_meta_options(model)
        # The feed's query: one organization's rows since a date.
        options["indexes"] = [
            models.Index(
                fields=["history_organization_id", "history_date"],
                name=f"hist_{self.kind[:17]}_org_date",
            )
        ]
        return options

    def post_save(self, instance, created, using=None, **kwargs):
        # A save that changed nothing we keep (the admin's Save on an untouched form, an
        # upsert's second save) is not a change: no row.
        if not created and not kwargs.get("raw", False) and self._unchanged(instance):
            return
        super().post_save(instance, created, using=using, **kwargs)

    def _unchanged(self, instance) -> bool:
        history = getattr(type(instance), self.manager_name)
        pk = instance._meta.pk.attname
        last = history.filter(**{pk: instance.pk}).order_by("-history_id").first()
        if last is None:
            return False
        return all(
            getattr(last, field.attname) == getattr(instance, field.attname)
            for field in self.fields_included(instance)
            if not getattr(field, "auto_now", False)
        )

    def finalize(self, sender, **kwargs):
        already = hasattr(sender._meta, "simple_history_manager_attribute")
        super().finalize(sender, **kwargs)
        if not already and hasattr(sender._meta, "simple_history_manager_attribute"):
            history_model = getattr(sender, self.manager_name).model
            history_model.audit_kind = self.kind
            history_model.audit_organization_of = staticmethod(self.organization_of)
            history_model.audit_action = staticmethod(self.action)
            AUDITED[self.kind] = history_model


def audited(
    kind: str,
    *,
    organization: Callable = _organization_id,
    exclude: Iterable = (),
    action: Callable | None = None,
):
    """The `history = audited("<kind>")` of an audited model (see the module's docstring).

    `organization(obj)` → the object's organization id; `action(row, before)` → a word for a
    change that says more than "changed" (an API key's "revoked"), or None."""
    return AuditedRecords(kind, organization, action, excluded_fields=list(exclude))


def related(obj, field: str):
    """`obj.<field>`, or None when that row is gone already: a delete cascading over a
    *nullable* foreign key may remove the related row before `obj` (Django does not order
    those), and `obj`'s history row is written after both are gone."""
    try:
        return getattr(obj, field)
    except ObjectDoesNotExist:
        return None


def label_of(obj) -> str:
    """The history row's label: `str(obj)`, or its kind and id when `__str__` reads a related
    row the same delete removed already (see `related`): never a 500 that undoes the delete."""
    try:
        return str(obj)[:300]
    except ObjectDoesNotExist:
        return f"{obj._meta.verbose_name} {obj.pk}"[:300]


def _fill(sender, instance, history_instance, **kwargs) -> None:
    if not isinstance(history_instance, AuditedHistory):
        return
    actor = current_actor()
    history_instance.history_organization_id = sender.audit_organization_of(instance)
    history_instance.history_object_label = label_of(instance)
    history_instance.history_actor_kind = actor.kind
    history_instance.history_actor_label = actor.label[:200]
    history_instance.history_actor_key_prefix = actor.key_prefix


pre_create_historical_record.connect(_fill, dispatch_uid="organization.history.fill")


def record_changes(objs: Iterable[models.Model]) -> None:
    """Historical rows ("changed") for objects written by `QuerySet.update`, which sends no
    signal: pass them as they are now (read back after the update)."""
    objs = list(objs)
    if not objs:
        return
    history = type(objs[0]).history
    actor = current_actor()
    for obj in objs:
        obj._history_user = _history_user()
        attrs = {
            "history_organization_id": history.model.audit_organization_of(obj),
            "history_object_label": label_of(obj),
            "history_actor_kind": actor.kind,
            "history_actor_label": actor.label[:200],
            "history_actor_key_prefix": actor.key_prefix,
        }
        history.bulk_history_create([obj], update=True, custom_historical_attrs=attrs)
