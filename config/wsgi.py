import os

from django.core.wsgi import get_wsgi_application

from infrastructure.tracing import setup as setup_tracing

if not os.environ.get("DJANGO_SETTINGS_MODULE", "").strip():  # unset or empty: the default
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
# Traces, when OTEL_EXPORTER_OTLP_ENDPOINT is set: before Django builds its middleware.
setup_tracing(web=True)
django_application = get_wsgi_application()

from config.guards import guarded  # noqa: E402  (after Django is set up)

application = guarded(django_application)

# As config.asgi's lifespan does: genai-prices' table is loaded at start, not by the first
# request a budget's check prices.
from costs.pricing import load_price_table  # noqa: E402

load_price_table()
