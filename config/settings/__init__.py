"""Settings, read from the environment: one module per concern, composed here. Every default
is the embedded one `make run` uses on a fresh machine: SQLite under var/, a filesystem broker,
the offline LLM provider."""

# In the order start-up reads and checks them, not sorted.
# ruff: noqa: F403, I001
from config.settings.environment import *
from config.settings.base import *
from config.settings.database import *
from config.settings.broker import *
from config.settings.domain import *
from config.settings.api import *
