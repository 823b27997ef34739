import os

from django.core.wsgi import get_wsgi_application

if not os.environ.get("DJANGO_SETTINGS_MODULE", "").strip():  # unset or empty: the default
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
django_application = get_wsgi_application()

from config.guards import guarded  # noqa: E402  (after Django is set up)

application = guarded(django_application)

# As config.asgi's lifespan does: genai-prices' table is loaded at start, not by the first
# request a budget's check prices.
from costs.pricing import load_price_table  # noqa: E402

load_price_table()
