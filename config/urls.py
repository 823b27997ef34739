from django.contrib import admin
from django.urls import include, path
from django.views.generic import TemplateView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from console.prometheus import metrics

from .health import healthz

# The API's hottest paths first: Django tries the patterns in order, and no two overlap.
urlpatterns = [
    path("api/", include("organization.urls")),
    path("api/", include("tasks.urls")),
    path("api/", include("runtime.urls")),
    path("api/", include("collaboration.urls")),
    path("api/", include("organization.discovery.urls")),
    path("api/", include("organization.a2a.urls")),
    path("api/", include("costs.urls")),
    path("api/", include("routines.urls")),
    path("api/schema/", SpectacularAPIView.as_view(permission_classes=[]), name="schema"),
    path(
        "api/docs/",
        SpectacularSwaggerView.as_view(url_name="schema", permission_classes=[]),
        name="docs",
    ),
    path("healthz", healthz, name="healthz"),
    path("metrics", metrics, name="metrics"),
    # The first page a newcomer opens: where the console, the API docs and the health check are.
    path("", TemplateView.as_view(template_name="home.html"), name="home"),
    path("admin/", admin.site.urls),
]

# One JSON error shape under /api/ (Django's HTML pages elsewhere); see infrastructure/errors.py.
handler400 = "infrastructure.errors.bad_request"
handler404 = "infrastructure.errors.page_not_found"
handler500 = "infrastructure.errors.server_error"
