"""The Host header never reaches a URL we hand out; settings refuse an unsafe start (issue 8)."""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.conftest import KeyClient, agent_of
from tests.factories import make_agent, make_key, make_org

BASE_DIR = Path(__file__).resolve().parents[2]
PRINT_SETTINGS = (
    "import json; from django.conf import settings as s; "
    "print(json.dumps({'key': s.SECRET_KEY, 'hosts': s.ALLOWED_HOSTS, "
    "'csrf': s.CSRF_TRUSTED_ORIGINS}))"
)


DEPLOYMENT = {"SECRET_KEY", "SECRET_KEY_FILE", "DEBUG", "ALLOWED_HOSTS", "PUBLIC_BASE_URL"}


def deployment_env(var_dir: Path, **env: str) -> dict:
    """This environment without the deployment variables, with `env` and its own var/."""
    clean = {k: v for k, v in os.environ.items() if k not in DEPLOYMENT}
    return {**clean, "DJANGO_SETTINGS_MODULE": "config.settings", "VAR_DIR": str(var_dir), **env}


def settings_process(**env: str) -> subprocess.CompletedProcess:
    """config.settings loaded in a fresh process with exactly these deployment variables."""
    with tempfile.TemporaryDirectory() as scratch:
        var_dir = Path(env.pop("VAR_DIR", scratch))
        return subprocess.run(
            [sys.executable, "-c", PRINT_SETTINGS],
            cwd=BASE_DIR,
            env=deployment_env(var_dir, **env),
            capture_output=True,
            text=True,
            timeout=60,
        )


def settings_with(**env: str) -> dict:
    done = settings_process(**env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_without_secret_key_and_debug_off_the_service_refuses_to_start(tmp_path):
    done = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=BASE_DIR,
        env=deployment_env(tmp_path, DEBUG="0"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "ImproperlyConfigured: SECRET_KEY is not set" in done.stderr


def test_the_key_is_read_from_secret_key_file(tmp_path):
    (tmp_path / "secret_key").write_text("k3y-from-the-file\n")
    assert settings_with(SECRET_KEY_FILE=str(tmp_path / "secret_key"))["key"] == "k3y-from-the-file"
    assert settings_with(SECRET_KEY="from-env", SECRET_KEY_FILE="/nonexistent")["key"] == "from-env"


def test_the_key_make_run_keeps_under_var_is_found(tmp_path):
    (tmp_path / "secret_key").write_text("kept-by-make-run\n")
    assert settings_with(VAR_DIR=str(tmp_path))["key"] == "kept-by-make-run"


def test_an_unreadable_secret_key_file_is_a_clear_error(tmp_path):
    done = settings_process(SECRET_KEY_FILE=str(tmp_path / "missing"))
    assert done.returncode != 0
    assert "ImproperlyConfigured: SECRET_KEY_FILE=" in done.stderr


def test_debug_may_run_without_a_key():
    assert settings_with(DEBUG="1")["key"].startswith("dev-only-insecure-key")


def test_allowed_hosts_default_to_this_machine_and_the_public_host():
    assert settings_with(SECRET_KEY="k")["hosts"] == ["localhost", "127.0.0.1", "[::1]"]
    configured = settings_with(SECRET_KEY="k", PUBLIC_BASE_URL="https://agents.example.com/")
    assert configured["hosts"] == ["localhost", "127.0.0.1", "[::1]", "agents.example.com"]
    assert configured["csrf"] == ["https://agents.example.com"]
    assert settings_with(SECRET_KEY="k", ALLOWED_HOSTS="a.example, b.example")["hosts"] == [
        "a.example",
        "b.example",
    ]


@pytest.mark.parametrize(
    "url", ["ftp://agents.example.com", "agents.example.com", "https://x.example/app"]
)
def test_a_malformed_public_base_url_is_refused(url):
    done = settings_process(SECRET_KEY="k", PUBLIC_BASE_URL=url)
    assert done.returncode != 0
    assert "ImproperlyConfigured: PUBLIC_BASE_URL=" in done.stderr


@pytest.fixture
def sarah(db):
    return make_agent(make_org("acme"), "agent-sarah", name="Sarah")


def test_a_forged_host_is_refused_by_default(sarah, client):
    response = client.get(
        "/api/agents/agent-sarah/card",
        HTTP_AUTHORIZATION=f"Bearer {make_key(sarah.organization, sarah)}",
        HTTP_HOST="evil.example",
    )
    assert response.status_code == 400


def test_cards_and_locations_use_public_base_url_not_the_host(sarah, client, settings):
    settings.ALLOWED_HOSTS = ["*"]  # even where every Host is let through
    settings.PUBLIC_BASE_URL = "https://agents.example.com"
    auth = {
        "HTTP_AUTHORIZATION": f"Bearer {make_key(sarah.organization, sarah)}",
        "HTTP_HOST": "evil.example",
    }
    card = client.get("/api/agents/agent-sarah/card", **auth).json()
    assert card["url"] == "https://agents.example.com/api/tasks"
    assert card["provider"]["url"] == "https://agents.example.com"
    index = client.get("/api/agent-cards", **auth).json()
    assert index["cards"][0]["url"] == "https://agents.example.com/api/tasks"
    response = client.post(
        "/api/collaborations",
        json.dumps({"task": "t", "agents": [{"name": "reviewer"}]}),
        content_type="application/json",
        **auth,
    )
    assert response.status_code == 202, response.content
    url = f"https://agents.example.com/api/collaborations/{response.json()['id']}"
    assert response["Location"] == url
    assert response.json()["url"] == url
    assert "evil.example" not in response.content.decode() + json.dumps(card) + json.dumps(index)


PUBLIC = "https://agents.example.com"


@pytest.mark.django_db
@pytest.mark.parametrize(
    "path",
    ["/api/agents?limit=1", "/api/agent-cards?limit=1", "/api/teams?limit=1", "/api/tasks?limit=1"],
)
def test_pagination_links_are_built_from_public_base_url_not_the_request_host(demo, settings, path):
    """A page's links are URLs handed out: behind a TLS proxy (the request arrives as
    http://agents.example.com) they still read https://agents.example.com/…"""
    settings.PUBLIC_BASE_URL = PUBLIC
    # What config/settings/ makes of PUBLIC_BASE_URL by default: this machine + its host.
    settings.ALLOWED_HOSTS = ["localhost", "127.0.0.1", "[::1]", "agents.example.com"]
    client = KeyClient(make_key(demo, agent_of(demo, "agent-sarah")))
    # A TLS-terminating proxy forwards plain http with the public Host.
    page = client.get(path, HTTP_HOST="agents.example.com").json()
    assert page["next"] is not None
    assert page["next"].startswith(PUBLIC + "/api/"), page["next"]
