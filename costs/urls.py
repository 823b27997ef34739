from django.urls import path

from . import api

# No trailing slashes (docs/design.md).
urlpatterns = [
    path("usage", api.UsageView.as_view(), name="usage"),
    path("costs", api.CostsView.as_view(), name="costs"),
    path("budgets", api.BudgetsView.as_view(), name="budgets"),
    path("budgets/alerts", api.BudgetAlertsView.as_view(), name="budget-alerts"),
]
