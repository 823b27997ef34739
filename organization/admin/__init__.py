"""The admin: the organization app's registrations, the scoping toolkit, the org chart.

- `scoping.py` — the toolkit every app's admin uses (OrgScoped, OrgOwnedAdmin, ReadOnlyInline,
  admin_org_ids, badge and the one status colour map).
- `registrations.py` — the organization's ModelAdmins (the hierarchy editor).
- `chart.py` — the org chart page.
"""

from . import registrations  # noqa: F401  registers the ModelAdmins
