from django.urls import path

from . import api

sessions = api.CollaborationViewSet.as_view({"get": "list", "post": "create"})
detail = api.CollaborationViewSet.as_view({"get": "retrieve"})
estimate = api.CollaborationViewSet.as_view({"post": "estimate"})
cancel = api.CollaborationViewSet.as_view({"post": "cancel"})

# No trailing slashes (docs/design.md): /api/collaborations, /api/collaborations/<id>.
urlpatterns = [
    path("collaborations", sessions, name="collaboration-list"),
    path("collaborations/estimate", estimate, name="collaboration-estimate"),
    path("collaborations/<str:pk>", detail, name="collaboration-detail"),
    path("collaborations/<str:pk>/cancel", cancel, name="collaboration-cancel"),
]
