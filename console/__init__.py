"""The manager's console (issue 13): the admin index as a dashboard of what needs a human.

The top layer (pyproject's [tool.importlinter]): it reads every app below it and none of them
imports it.

- `metrics.py` — the registry of the dashboard's counts (`Metric`, `register`) and its panels.
- `site.py` — the admin site (`ConsoleAdminSite`, installed by `apps.ConsoleAdminConfig` in
  place of `django.contrib.admin`): the index is the dashboard, Django's own models go last.
- `dashboard.py` — which organization the dashboard is for, and its context.
"""
