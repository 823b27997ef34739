"""The organization list's export action and its import page (upload, see the changes, confirm).

The organization's admin is registered again, extended (as runtime/admin/pages.py extends the
agent's): the organization app never imports this one."""

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse

from organization.admin.organizations import OrganizationAdmin
from organization.admin.scoping import admin_org_ids
from organization.models import Organization

from .document import Refused, check, parse
from .services import org_file, org_import, target_slug


class ImportForm(forms.Form):
    file = forms.FileField(required=False, help_text="An agent-org JSON file (export_org's).")
    as_slug = forms.SlugField(
        label="Import as",
        required=False,
        help_text="The organization to create or update (default: the file's slug).",
    )
    # The uploaded file's text, carried from the preview to the confirmation.
    document = forms.CharField(required=False, widget=forms.HiddenInput)


def may_import_into(request, slug: str) -> bool:
    """Into an organization the user administers; a new one only for a superuser (who alone
    may add organizations). One answer for both, so the page tells no one which slugs exist."""
    org = Organization.objects.filter(slug=slug).first()
    if org is None:
        return request.user.is_superuser
    ids = admin_org_ids(request)
    return ids is None or org.pk in ids


class PortableOrganizationAdmin(OrganizationAdmin):
    change_list_template = "admin/portability/organization_change_list.html"
    actions = [*OrganizationAdmin.actions, "export_file"]

    @admin.action(description="Export the selected organization as a file (JSON)")
    def export_file(self, request, queryset):
        orgs = list(queryset[:2])
        if len(orgs) != 1:
            self.message_user(request, "Export one organization at a time.", messages.ERROR)
            return None
        org = orgs[0]
        response = HttpResponse(org_file(org), content_type="application/json")
        response["Content-Disposition"] = f'attachment; filename="{org.slug}.agent-org.json"'
        return response

    def get_urls(self):
        page = self.admin_site.admin_view(self.import_view)
        return [
            path("import/", page, name="organization_organization_import"),
            *super().get_urls(),
        ]

    def import_view(self, request):
        if admin_org_ids(request) == set():
            raise PermissionDenied
        form = ImportForm(request.POST or None, request.FILES or None)
        context = {
            **self.admin_site.each_context(request),
            "title": "Import an organization from a file",
            "opts": self.model._meta,
            "form": form,
        }
        if request.method == "POST" and form.is_valid():
            try:
                text = self._text(form)
                document = parse(text)
                check(document)
                slug = target_slug(document, form.cleaned_data["as_slug"] or None)
                if not may_import_into(request, slug):
                    raise Refused(
                        f"You may import only into an organization you administer ({slug}); "
                        "a superuser may also create one."
                    )
                confirm = "confirm" in request.POST
                report = org_import(
                    document,
                    as_slug=form.cleaned_data["as_slug"] or None,
                    user=request.user,
                    dry_run=not confirm,
                )
            except Refused as exc:
                context["refusal"] = exc.message
            else:
                if confirm:
                    self.log_change(request, report.organization, "Imported from a file.")
                    self.message_user(request, f"Imported {report.summary()}", messages.SUCCESS)
                    url = reverse(
                        "admin:organization_organization_change", args=[report.organization.pk]
                    )
                    return redirect(url)
                context["report"] = report
                context["document_text"] = text
        return TemplateResponse(request, "admin/portability/import.html", context)

    @staticmethod
    def _text(form: ImportForm) -> str:
        upload = form.cleaned_data["file"]
        if upload is None:
            if not form.cleaned_data["document"]:
                raise Refused("Choose a file to import.")
            return form.cleaned_data["document"]
        if upload.size > settings.DATA_UPLOAD_MAX_MEMORY_SIZE:
            raise Refused(
                f"The file is larger than {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes "
                "(DATA_UPLOAD_MAX_MEMORY_SIZE)."
            )
        try:
            return upload.read().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise Refused("The file is not UTF-8 text.") from exc


admin.site.unregister(Organization)
admin.site.register(Organization, PortableOrganizationAdmin)
