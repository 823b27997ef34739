"""The forms every organization ModelAdmin shares: a name unique in its organization, expertise."""

from django import forms


class OrgUniqueNameForm(forms.ModelForm):
    """Once organization is read-only Django skips the (organization, <name>) constraint: check it."""

    unique_in_org: str = "name"

    def clean(self):
        cleaned = super().clean()
        value = cleaned.get(self.unique_in_org)
        org_id = self.instance.organization_id
        if value and org_id and "organization" not in self.fields:
            clash = type(self.instance)._default_manager.filter(
                organization_id=org_id, **{self.unique_in_org: value}
            )
            if clash.exclude(pk=self.instance.pk).exists():
                label = self.instance._meta.get_field(self.unique_in_org).verbose_name
                self.add_error(
                    self.unique_in_org, f"This organization already has one with this {label}."
                )
        return cleaned


class ExpertiseField(forms.CharField):
    """Expertise one term per line in the form (a term may hold a comma), a JSON list in the database."""

    def __init__(self, **kwargs):
        kwargs.setdefault("required", False)
        kwargs.setdefault("help_text", "One term per line, exact and case-sensitive.")
        kwargs.setdefault("widget", forms.Textarea(attrs={"rows": 4, "cols": 40}))
        super().__init__(**kwargs)

    def prepare_value(self, value):
        if isinstance(value, list):
            return "\n".join(value)
        return value

    def to_python(self, value):
        if isinstance(value, list):
            return value
        text = super().to_python(value)
        return [term.strip() for term in text.splitlines() if term.strip()]

    def has_changed(self, initial, data):
        return (initial or []) != self.to_python(data)


def expertise_words(terms) -> str:
    return ", ".join(terms or []) or "—"
