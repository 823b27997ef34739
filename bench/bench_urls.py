"""The service's URLs plus `/bench/minimal`: a Django view returning a small JSON body."""

from django.http import JsonResponse
from django.urls import path

from config.urls import *  # noqa: F403
from config.urls import urlpatterns as service_urls


def minimal(request):
    return JsonResponse({"ok": True})


urlpatterns = [path("bench/minimal", minimal), *service_urls]
