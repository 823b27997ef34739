"""Routines in the admin: their schedule, next run and last occurrence; the webhook secret on
the routine's page with a rotate action. Every write goes through `routines.services`."""

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from infrastructure.errors import DomainError
from organization.admin.display import STATUS_COLOURS, badge, human, two_lines
from organization.admin.scoping import OrgOwnedAdmin

from . import services
from .models import ROUTINE_FIELDS, Routine
from .schedule import describe
from .selectors import LISTED, with_last

STATUS_COLOURS["occurrence"] = {"created": "#198754", "skipped": "#6c757d", "held": "#fd7e14"}
RECENT_SHOWN = 20
EDITABLE = ["organization", *ROUTINE_FIELDS]


class RoutineForm(forms.ModelForm):
    class Meta:
        model = Routine
        fields = EDITABLE

    def clean(self):
        data = super().clean()
        if bool(data.get("team")) == bool(data.get("agent")):
            raise ValidationError("Choose the owner: a team or an agent.")
        # The services find the owner by its name in the routine's organization.
        organization = data.get("organization") or getattr(self.instance, "organization", None)
        for name in ("team", "agent"):
            owner = data.get(name)
            if owner is not None and organization and owner.organization_id != organization.pk:
                raise ValidationError({name: f"This {name} is not of {organization}."})
        draft = Routine(**{k: v for k, v in data.items() if k in EDITABLE})
        try:
            services.check_routine(draft)
        except DomainError as exc:
            raise ValidationError(exc.message) from None
        return data


def fields_of(routine: Routine, names) -> dict:
    """The service's keywords for `names`: the owner by its name or id."""
    values = {}
    for name in names:
        if name == "team":
            values["team"] = routine.team.name if routine.team_id else None
        elif name == "agent":
            values["agent"] = routine.agent.handle if routine.agent_id else None
        elif name != "organization":
            values[name] = getattr(routine, name)
    return values


@admin.register(Routine)
class RoutineAdmin(OrgOwnedAdmin):
    form = RoutineForm
    list_display = ["title", "owner_display", "schedule", "next_run", "last", "enabled"]
    list_filter = ["enabled", "concurrency", "catch_up"]
    list_select_related = ["organization", "team", "agent"]
    search_fields = ["title", "required_expertise"]
    autocomplete_fields = ["team", "agent"]
    actions = ["rotate_secret"]

    def get_queryset(self, request):
        return with_last(super().get_queryset(request))

    def get_fields(self, request, obj=None):
        extra = ["next_run_at", "webhook_secret", "recent_occurrences"] if obj else []
        return EDITABLE + extra

    def get_readonly_fields(self, request, obj=None):
        readonly = tuple(super().get_readonly_fields(request, obj))
        return readonly + ("next_run_at", "webhook_secret", "recent_occurrences")

    @admin.display(description="owner")
    def owner_display(self, routine):
        return two_lines(routine.owner, "team" if routine.team_id else "agent")

    @admin.display(description="schedule")
    def schedule(self, routine):
        return describe(routine)

    @admin.display(description="next run", ordering="next_run_at")
    def next_run(self, routine):
        return routine.next_run_at or "—"

    @admin.display(description="last occurrence", ordering="last_at")
    def last(self, routine):
        if routine.last_at is None:
            return "—"
        return two_lines(
            badge(routine.last_outcome, "occurrence", human(routine.last_outcome)), routine.last_at
        )

    @admin.display(description="webhook secret")
    def webhook_secret(self, routine):
        return format_html(
            "<code>{}</code><br><span class='quiet'>Signs POST /api/routines/{}/trigger "
            "(docs/routines.md); rotate it with the list's action.</span>",
            services.webhook_secret(routine),
            routine.pk,
        )

    @admin.display(description=f"last {RECENT_SHOWN} occurrences")
    def recent_occurrences(self, routine):
        rows = list(
            routine.occurrences.filter(outcome__in=LISTED).order_by("-at", "-pk")[:RECENT_SHOWN]
        )
        if not rows:
            return "—"
        task_url = reverse("admin:tasks_task_changelist")
        return format_html(
            "<table>{}</table>",
            format_html_join(
                "",
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                (
                    (
                        o.at,
                        badge(o.outcome, "occurrence", human(o.outcome)),
                        format_html(
                            '<a href="{}{}/change/">task {}</a>', task_url, o.task_id, o.task_id
                        )
                        if o.task_id
                        else "",
                        o.reason,
                    )
                    for o in rows
                ),
            ),
        )

    @admin.action(description="Rotate the webhook secret (the old one stops at once)")
    def rotate_secret(self, request, queryset):
        for routine in queryset:
            services.routine_rotate_secret(routine=routine)
        self.message_user(
            request,
            f"Rotated the webhook secret of {queryset.count()} routine(s): each page shows its "
            "new one.",
            messages.SUCCESS,
        )

    def save_model(self, request, obj, form, change):
        """Through the services, as the API: the PeriodicTask follows, a new secret is drawn."""
        if change:
            changed = [name for name in form.changed_data if name in EDITABLE]
            stored = Routine.objects.get(pk=obj.pk)
            services.routine_update(routine=stored, **fields_of(obj, changed))
        else:
            saved, _ = services.routine_create(
                organization=obj.organization, **fields_of(obj, EDITABLE)
            )
            obj.pk = saved.pk
        obj.refresh_from_db()

    def delete_model(self, request, obj):
        services.routine_delete(routine=obj)

    def delete_queryset(self, request, queryset):
        for routine in queryset:
            services.routine_delete(routine=routine)
