"""The service's own settings plus one URL: a minimal Django JSON view, the floor of the HTTP
benchmarks (bench/api.py, bench/serving.py). Served by the same server, middleware and
settings as the API; only the URL conf differs, so the view is never part of the service."""

from config.settings import *  # noqa: F403

ROOT_URLCONF = "bench.bench_urls"
