"""The expertise group page: a named list of terms an organization routes work by."""

from django.contrib import admin

from ..models import ExpertiseGroup
from .forms import ExpertiseField, OrgUniqueNameForm, expertise_words
from .history import HistoryAdmin
from .scoping import OrgOwnedAdmin


class ExpertiseGroupForm(OrgUniqueNameForm):
    expertise = ExpertiseField()

    class Meta:
        model = ExpertiseGroup
        fields = ["organization", "name", "expertise"]


@admin.register(ExpertiseGroup)
class ExpertiseGroupAdmin(HistoryAdmin, OrgOwnedAdmin):
    form = ExpertiseGroupForm
    list_display = ["name", "organization", "expertise_display"]
    list_select_related = ["organization"]
    search_fields = ["name", "expertise"]

    @admin.display(description="expertise")
    def expertise_display(self, group):
        return expertise_words(group.expertise)
