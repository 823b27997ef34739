from django.urls import path

from . import api

routines = api.RoutineViewSet

# No trailing slashes (docs/design.md).
urlpatterns = [
    path("routines", routines.as_view({"get": "list", "post": "create"}), name="routines"),
    path(
        "routines/<str:pk>",
        routines.as_view({"get": "retrieve", "patch": "partial_update", "delete": "destroy"}),
        name="routine",
    ),
    path(
        "routines/<str:pk>/occurrences",
        routines.as_view({"get": "occurrences"}),
        name="routine-occurrences",
    ),
    path("routines/<str:pk>/run", routines.as_view({"post": "run"}), name="routine-run"),
    path("routines/<str:pk>/trigger", api.RoutineTriggerView.as_view(), name="routine-trigger"),
]
