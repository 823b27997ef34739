"""The admin toolkit every app's admin uses: tenant scoping.

Superusers see everything; other staff see, edit and are granted permissions for only the
organizations they administer (`OrgScoped`, `OrgOwnedAdmin`, `ReadOnlyInline`).
"""

import functools
import re

from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.widgets import AutocompleteSelect, ForeignKeyRawIdWidget
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import DataError, NotSupportedError, connection, models

from infrastructure.inputs import parse_id

from ..caller import admin_organizations
from ..models import Agent, Organization, Team
from .words import DurationInWordsField, relabel

# --- who administers what ------------------------------------------------------------------


def admin_org_ids(request) -> set[int] | None:
    """Ids of the organizations the user may edit in the admin; None means all (superuser).

    Cached on the request: every permission check of one admin page asks it again.
    """
    user = request.user
    if user.is_active and user.is_superuser:
        return None
    cached = getattr(request, "_admin_org_ids", None)
    if cached is None:
        if user.is_active and user.is_staff:
            cached = set(admin_organizations(user).values_list("pk", flat=True))
        else:
            cached = set()
        request._admin_org_ids = cached
    return cached


# --- tenancy: one mixin for ModelAdmins and inlines ---------------------------------------


def _org_id_along(obj, path: str) -> int | None:
    """The organization id reached from `obj` by `path` ("organization", "agent__organization")."""
    *hops, last = path.split("__")
    for hop in hops:
        obj = getattr(obj, hop, None)
        if obj is None:
            return None
    return getattr(obj, f"{last}_id")


def _scope_org_id(request) -> int | None:
    """The organization the form being built belongs to, when it is known (see get_form)."""
    return getattr(request, "_admin_scope_org_id", None)


class OrgAutocompleteSelect(AutocompleteSelect):
    """Autocomplete whose search is limited to one organization (`?org_scope=<id>`)."""

    def __init__(self, *args, org_id: int | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.org_id = org_id

    def get_url(self) -> str:
        url = super().get_url()
        return f"{url}?org_scope={self.org_id}" if self.org_id else url


class OrgRawIdWidget(ForeignKeyRawIdWidget):
    """A raw-id box that names only an object the form may choose.

    Django's looks the typed id up in the whole table and prints its name with a link, so
    `?task=<id>` on an add form would read out another organization's task titles."""

    def __init__(self, rel, admin_site, *, queryset, **kwargs):
        super().__init__(rel, admin_site, **kwargs)
        self.queryset = queryset

    def label_and_url_for_value(self, value):
        key = self.rel.get_related_field().name
        try:
            if not self.queryset.filter(**{key: value}).exists():
                return "", ""
        except (ValueError, ValidationError):
            return "", ""
        return super().label_and_url_for_value(value)


def _has_organization(model) -> bool:
    return any(field.name == "organization" for field in model._meta.concrete_fields)


@functools.cache
def _bounded_dates(changelist_class):
    """`changelist_class` refusing, as a bad filter (`?e=1`) and not a 500, what the database
    or the SQL compiler cannot take in a list's query string (dates past 9999, bad regexes,
    lookups the database lacks).
    """

    class BoundedDatesChangeList(changelist_class):
        def get_filters(self, request):
            try:
                if connection.vendor == "sqlite":
                    for name, value in request.GET.items():
                        if name.endswith(("__regex", "__iregex")):
                            re.compile(value)
                return super().get_filters(request)
            except (ValueError, OverflowError, re.error) as exc:
                raise IncorrectLookupParameters(exc) from exc

        def get_results(self, request):
            try:
                return super().get_results(request)
            except (ValueError, OverflowError, DataError, NotSupportedError) as exc:
                raise IncorrectLookupParameters(exc) from exc

    return BoundedDatesChangeList


class BoundedLookups:
    """A list refuses what its database cannot take in its query string as any bad filter
    (Django's ?e=1), not a 500 (`_bounded_dates`). Every admin of the site has it (the console's
    site adds it to Django's own apps' admins as they register)."""

    def get_changelist(self, request, **kwargs):
        return _bounded_dates(super().get_changelist(request, **kwargs))


class OrgScoped(BoundedLookups):
    """Scopes querysets, foreign-key choices and permissions to the user's organizations.

    `org_path` leads from the admin's model to its Organization. For inlines, `parent_org_path`
    leads from the parent object (what Django passes as `obj`) to the Organization.
    """

    org_path = "organization"
    parent_org_path: str | None = None

    def get_queryset(self, request):
        qs = super().get_queryset(request)
        ids = admin_org_ids(request)
        if ids is None:
            return qs
        return qs.filter(**{f"{self.org_path}__in": ids})

    def _obj_org_id(self, obj) -> int | None:
        if self.parent_org_path is not None:
            if self.parent_org_path == "pk":
                return obj.pk
            return _org_id_along(obj, self.parent_org_path)
        if isinstance(obj, Organization):
            return obj.pk
        return _org_id_along(obj, self.org_path)

    def _allowed(self, request, obj=None) -> bool:
        ids = admin_org_ids(request)
        if ids is None:
            return True
        if not ids:
            return False
        if obj is None or (self.parent_org_path is not None and obj.pk is None):
            return True
        return self._obj_org_id(obj) in ids

    def has_module_permission(self, request):
        return self._allowed(request)

    def has_view_permission(self, request, obj=None):
        return self._allowed(request, obj)

    def has_change_permission(self, request, obj=None):
        return self._allowed(request, obj)

    def has_add_permission(self, request, *args):
        obj = args[0] if args else None
        return self._allowed(request, obj)

    def has_delete_permission(self, request, obj=None):
        return self._allowed(request, obj)

    def formfield_for_dbfield(self, db_field, request, **kwargs):
        """Labels in words ("LLM provider", "Limit (USD)"); durations typed and shown as words."""
        if isinstance(db_field, models.DurationField):
            kwargs.setdefault("form_class", DurationInWordsField)
        formfield = super().formfield_for_dbfield(db_field, request, **kwargs)
        relabel(db_field, formfield)
        return formfield

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        ids = admin_org_ids(request)
        scope = _scope_org_id(request)
        model = db_field.related_model
        if model is Organization:
            qs = Organization.objects.all()
            if ids is not None:
                qs = qs.filter(pk__in=ids)
            kwargs.setdefault("queryset", qs)
        elif model in (Agent, Team):
            qs = model._default_manager.all()
            if ids is not None:
                qs = qs.filter(organization__in=ids)
            if db_field.name in self.get_autocomplete_fields(request):
                # The search offers the form's organization only; a choice from another
                # organization of the user is refused by Model.clean with its own message.
                kwargs.setdefault(
                    "widget", OrgAutocompleteSelect(db_field, self.admin_site, org_id=scope)
                )
            elif scope is not None:
                qs = qs.filter(organization_id=scope)
            kwargs.setdefault("queryset", qs)
        elif model is get_user_model() and ids is not None:
            # Staff choose among the people of their own organizations, never the whole user table.
            kwargs.setdefault(
                "queryset",
                model._default_manager.filter(memberships__organization__in=ids).distinct(),
            )
        elif _has_organization(model):
            # Any other organization's row (a budget's task): one of an organization the user
            # does not administer answers as one that does not exist, in the choices, the
            # validation and a raw-id box's label. (Among the user's own, Model.clean says
            # which organization the row is not of.)
            qs = model._default_manager.all()
            if ids is not None:
                qs = qs.filter(organization__in=ids)
            kwargs.setdefault("queryset", qs)
            if db_field.name in self.raw_id_fields:
                kwargs.setdefault(
                    "widget", OrgRawIdWidget(db_field.remote_field, self.admin_site, queryset=qs)
                )
        return super().formfield_for_foreignkey(db_field, request, **kwargs)


class ReadOnlyInline(OrgScoped, admin.TabularInline):
    """Rows only the services write (events, contributions): listed under their parent, never
    added, changed or deleted here. Set `org_path` and `parent_org_path` as for OrgScoped."""

    extra = 0
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class ScopedRelatedFilter(admin.RelatedFieldListFilter):
    """A foreign-key filter offering only the user's organizations (or their teams)."""

    def field_choices(self, field, request, model_admin):
        ids = admin_org_ids(request)
        limit = {}
        if ids is not None:
            limit = (
                {"pk__in": ids}
                if field.related_model is Organization
                else {"organization__in": ids}
            )
        ordering = self.field_admin_ordering(field, request, model_admin)
        return field.get_choices(include_blank=False, ordering=ordering, limit_choices_to=limit)


def sees_several_organizations(request) -> bool:
    """Whether an organization column or filter tells the user anything."""
    ids = admin_org_ids(request)
    if ids is None:
        cached = getattr(request, "_admin_several_orgs", None)
        if cached is None:
            cached = request._admin_several_orgs = Organization.objects.count() > 1
        return cached
    return len(ids) > 1


def only_organization_id(request) -> int | None:
    """The one organization the user can work in, when there is just one (a staff member's
    only organization; for a superuser, the database's only one), else None."""
    ids = admin_org_ids(request)
    if ids is not None:
        return next(iter(ids)) if len(ids) == 1 else None
    if not hasattr(request, "_admin_only_org_id"):
        first_two = list(Organization.objects.order_by("pk").values_list("pk", flat=True)[:2])
        request._admin_only_org_id = first_two[0] if len(first_two) == 1 else None
    return request._admin_only_org_id


def _choose_scope_org(request, obj) -> int | None:
    """The organization a change/add form is for: the object's, the one asked for, or the only one."""
    if obj is not None and obj.pk is not None:
        return obj.organization_id
    ids = admin_org_ids(request)
    asked = parse_id(request.POST.get("organization") or request.GET.get("organization"))
    if asked is not None and (ids is None or asked in ids):
        return asked
    return only_organization_id(request)


class OrgOwnedAdmin(OrgScoped, admin.ModelAdmin):
    """A model that belongs to one organization, which is fixed once the object exists."""

    def get_form(self, request, obj=None, change=False, **kwargs):
        request._admin_scope_org_id = _choose_scope_org(request, obj)
        return super().get_form(request, obj, change=change, **kwargs)

    def get_readonly_fields(self, request, obj=None):
        readonly = tuple(super().get_readonly_fields(request, obj))
        return readonly + ("organization",) if obj is not None else readonly

    def get_changeform_initial_data(self, request):
        initial = super().get_changeform_initial_data(request)
        scope = _scope_org_id(request)
        if scope is not None:
            initial.setdefault("organization", scope)
        return initial

    def get_list_filter(self, request):
        filters = list(super().get_list_filter(request))
        if sees_several_organizations(request):
            filters.insert(0, ("organization", ScopedRelatedFilter))
        return filters

    def get_search_results(self, request, queryset, search_term):
        # Only the autocomplete view passes org_scope: a team or senior of the agent's own org.
        scope = parse_id(request.GET.get("org_scope"))
        if scope is not None and request.path.endswith("/autocomplete/"):
            queryset = queryset.filter(organization_id=scope)
        return super().get_search_results(request, queryset, search_term)
