"""The admin: one module per model's page, the toolkit (`scoping.py`, `display.py`), the chart.

Importing the page modules registers their ModelAdmins; `forms.py` holds their shared forms.
"""

# Importing the modules registers their ModelAdmins, in this order.
from . import organizations  # noqa: F401, I001
from . import agents  # noqa: F401
from . import teams  # noqa: F401
from . import memberships  # noqa: F401
from . import expertise_groups  # noqa: F401
from . import api_keys  # noqa: F401
