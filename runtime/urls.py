from django.urls import path

from . import api

runs = api.RunViewSet.as_view({"get": "list"})
detail = api.RunViewSet.as_view({"get": "retrieve"})

# No trailing slashes (docs/design.md): /api/runs, /api/runs/<id>.
urlpatterns = [
    path("runs", runs, name="run-list"),
    path("runs/<str:pk>", detail, name="run-detail"),
]
