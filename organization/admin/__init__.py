"""The admin: one module per model's page, the scoping toolkit other apps' admins use, the chart.

- `scoping.py` — the toolkit every app's admin uses (OrgScoped, OrgOwnedAdmin, ReadOnlyInline,
  admin_org_ids, badge and the one status colour map).
- `organizations.py`, `agents.py`, `teams.py`, `memberships.py`, `expertise_groups.py`,
  `api_keys.py` — the organization's ModelAdmins (the hierarchy editor); `forms.py` their forms.
- `chart.py` — the org chart page.
"""

# Importing the modules registers their ModelAdmins, in this order.
from . import organizations  # noqa: F401, I001
from . import agents  # noqa: F401
from . import teams  # noqa: F401
from . import memberships  # noqa: F401
from . import expertise_groups  # noqa: F401
from . import api_keys  # noqa: F401
