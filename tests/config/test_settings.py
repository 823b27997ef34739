"""docs/configuration.md lists every environment variable the service reads; settings are strict.

The scope (stated in docs/configuration.md): the variables read by the service's own code —
every module of config/, manage.py and the apps organization/, tasks/, collaboration/, runtime/
(migrations aside) — found by reading their source, plus the variables the LLM SDKs read for us. A read is
`os.environ.get("X")`, `os.environ["X"]`, `"X" in os.environ`, `os.getenv("X")`,
`os.environ.setdefault("X", …)` or one of the settings' helpers `env_str/env_bool/env_int/env_float/
env_list/env_prices/env_interval/env_counts("X", …)`. A name computed at run time (`os.environ.get(variable)`) is not a read of a
name; the providers' key variables are read by name elsewhere too. The test suite's, benchmarks'
and example's variables are out of scope (listed at the end of the page, not checked).
"""

import ast
import json
import os
import re
import socket
import subprocess
import sys
from contextlib import nullcontext
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from config.settings import env_bool, env_float, env_int

BASE_DIR = Path(__file__).resolve().parents[2]
DOC = BASE_DIR / "docs" / "configuration.md"
SERVICE_CODE = ["config", "organization", "tasks", "collaboration", "runtime", "manage.py"]
HELPERS = {
    "env_str",
    "env_bool",
    "env_int",
    "env_float",
    "env_list",
    "env_prices",
    "env_interval",
    "env_counts",
}
# Read by a library on our behalf, not by our code; documented all the same.
# The SDKs read these themselves; the service only looks them up by name (collaboration.providers.SDK_KEYS).
READ_BY_LIBRARIES = {"OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"}
# The section of configuration.md that lists variables for reference only.
UNCHECKED_SECTION = "## Not checked"


def service_modules() -> list[Path]:
    files = []
    for name in SERVICE_CODE:
        path = BASE_DIR / name
        files += [path] if path.is_file() else sorted(path.rglob("*.py"))
    return [f for f in files if "migrations" not in f.parts]


def is_environ(node: ast.AST) -> bool:
    """`os.environ` (or a bare `environ` imported from os)."""
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or (
        isinstance(node, ast.Name) and node.id == "environ"
    )


def literal(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def names_read(source: str) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and node.args:
            func, first = node.func, literal(node.args[0])
            if first is None:
                continue
            if isinstance(func, ast.Attribute) and func.attr in {"get", "setdefault", "pop"}:
                if is_environ(func.value):
                    names.add(first)
            elif isinstance(func, ast.Attribute) and func.attr == "getenv":
                names.add(first)
            elif isinstance(func, ast.Name) and func.id in HELPERS | {"getenv"}:
                names.add(first)
        elif isinstance(node, ast.Subscript) and is_environ(node.value):
            if isinstance(node.ctx, ast.Load) and literal(node.slice) is not None:
                names.add(literal(node.slice))
        elif isinstance(node, ast.Compare) and len(node.comparators) == 1:
            if isinstance(node.ops[0], ast.In | ast.NotIn) and is_environ(node.comparators[0]):
                if literal(node.left) is not None:
                    names.add(literal(node.left))
    return names


def variables_read() -> dict[str, set[str]]:
    """{variable: the files that read it}."""
    read: dict[str, set[str]] = {}
    for path in service_modules():
        for name in names_read(path.read_text()):
            read.setdefault(name, set()).add(str(path.relative_to(BASE_DIR)))
    return read


def variables_documented() -> set[str]:
    """The first cell of every table row of configuration.md, above the unchecked section."""
    text = DOC.read_text().split(UNCHECKED_SECTION)[0]
    return set(re.findall(r"^\| `([A-Z][A-Z0-9_]*)` \|", text, re.M))


def test_the_reader_finds_every_form_of_read():
    source = """
import os
from os import environ
a = os.environ.get("A", "")
b = os.environ["B"]
c = "C" in os.environ
d = os.getenv("D")
os.environ.setdefault("E", "x")
f = env_int("F", 1)
g = environ.get("G")
h = os.environ.get(variable)   # a computed name: not a name
os.environ["I"] = "written, not read"
"""
    assert names_read(source) == {"A", "B", "C", "D", "E", "F", "G"}


def test_every_variable_the_service_reads_is_documented_and_every_documented_one_is_read():
    read = variables_read()
    documented = variables_documented()
    undocumented = {name: sorted(files) for name, files in read.items() if name not in documented}
    stale = documented - set(read) - READ_BY_LIBRARIES
    assert undocumented == {}, f"read but missing from docs/configuration.md: {undocumented}"
    assert stale == set(), f"in docs/configuration.md but read nowhere: {sorted(stale)}"
    assert READ_BY_LIBRARIES <= documented


def test_the_settings_module_is_in_scope():
    """The scope is not empty by accident (a moved settings module would make the test vacuous)."""
    read = variables_read()
    assert {"DATABASE_URL", "DEBUG", "SECRET_KEY", "API_THROTTLE_RATE"} <= set(read)
    assert "config/settings/domain.py" in read["COLLAB_MAX_AGENTS"]


# --- strict parsing -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, expected",
    [
        ("1", True),
        ("true", True),
        ("True", True),
        ("YES", True),
        (" on ", True),
        ("0", False),
        ("false", False),
        ("No", False),
        ("off", False),
        ("", False),
    ],
)
def test_booleans_accept_the_usual_words(monkeypatch, value, expected):
    monkeypatch.setenv("SOME_FLAG", value)
    assert env_bool("SOME_FLAG") is expected


def test_an_unset_boolean_is_its_default(monkeypatch):
    monkeypatch.delenv("SOME_FLAG", raising=False)
    assert env_bool("SOME_FLAG", True) is True
    assert env_bool("SOME_FLAG") is False


@pytest.mark.parametrize("value", ["ture", "y", "enabled", "2", "truee"])
def test_a_boolean_typo_is_refused_naming_variable_and_value(monkeypatch, value):
    monkeypatch.setenv("SOME_FLAG", value)
    with pytest.raises(ImproperlyConfigured) as refused:
        env_bool("SOME_FLAG")
    assert str(refused.value).startswith(f"SOME_FLAG={value!r}: use true or false")


def test_integers_parse_strictly(monkeypatch):
    monkeypatch.setenv("SOME_COUNT", " 42 ")
    assert env_int("SOME_COUNT", 5) == 42
    monkeypatch.setenv("SOME_COUNT", "")
    assert env_int("SOME_COUNT", 5) == 5
    for bad in ["80x", "4.5", "1e3", "five", "0x10", "1_000", "٣"]:
        monkeypatch.setenv("SOME_COUNT", bad)
        with pytest.raises(ImproperlyConfigured, match=rf"^SOME_COUNT={bad!r}: must be a whole"):
            env_int("SOME_COUNT", 5)


def test_an_integer_below_its_minimum_is_refused(monkeypatch):
    monkeypatch.setenv("SOME_COUNT", "0")
    assert env_int("SOME_COUNT", 5, minimum=0) == 0
    with pytest.raises(ImproperlyConfigured, match=r"^SOME_COUNT='0': must be at least 1\.$"):
        env_int("SOME_COUNT", 5, minimum=1)


def test_numbers_parse_strictly(monkeypatch):
    for good, value in [("0.3", 0.3), ("300", 300.0), (".5", 0.5), ("1e2", 100.0), ("0", 0.0)]:
        monkeypatch.setenv("SOME_SECONDS", good)
        assert env_float("SOME_SECONDS", 30.0) == value
    for bad in ["30s", "nan", "inf", "-1", "1,5", "half", "1e400", "-1e999"]:
        monkeypatch.setenv("SOME_SECONDS", bad)
        with pytest.raises(ImproperlyConfigured, match=rf"^SOME_SECONDS={bad!r}: must be"):
            env_float("SOME_SECONDS", 30.0)


def start_up(command: list[str], **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    return subprocess.run(
        [sys.executable, *command],
        cwd=BASE_DIR,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    "name, value, message",
    [
        ("DEBUG", "ture", "DEBUG='ture': use true or false"),
        (
            "WEBHOOK_ALLOW_PRIVATE_NETWORKS",
            "yes please",
            "WEBHOOK_ALLOW_PRIVATE_NETWORKS='yes please'",
        ),
        ("COLLAB_MAX_AGENTS", "5x", "COLLAB_MAX_AGENTS='5x': must be a whole number, e.g. 5."),
        ("API_MAX_PAGE_SIZE", "0", "API_MAX_PAGE_SIZE='0': must be at least 1."),
        ("COLLAB_AGENT_TIMEOUT", "5min", "COLLAB_AGENT_TIMEOUT='5min': must be a number"),
        # Infinity: COLLAB_SESSION_TIME_LIMIT's int() failed with OverflowError.
        (
            "COLLAB_AGENT_TIMEOUT",
            "1e400",
            "COLLAB_AGENT_TIMEOUT='1e400': must be a number, e.g. 300.",
        ),
        # Past timedelta's range (OverflowError), or past the beat's integer column.
        (
            "STALE_CHECK_SECONDS",
            "100000000000000",
            "STALE_CHECK_SECONDS='100000000000000': must be at most 2147483647.",
        ),
        (
            "OUTBOX_RELAY_SECONDS",
            "2147483648",
            "OUTBOX_RELAY_SECONDS='2147483648': must be at most 2147483647.",
        ),
        (
            "LOG_LEVEL",
            "verbose",
            "LOG_LEVEL='verbose': use DEBUG, INFO, WARNING, ERROR or CRITICAL.",
        ),
    ],
)
def test_a_typo_in_the_environment_stops_start_up_with_a_message(name, value, message):
    done = start_up(
        ["manage.py", "check"], DJANGO_SETTINGS_MODULE="config.settings", **{name: value}
    )
    assert done.returncode != 0
    assert f"ImproperlyConfigured: {message}" in done.stderr


@pytest.mark.parametrize("port", ["80x", "8_000", "+80", "٣", "0", "70000"])
def test_a_port_typo_stops_make_run_with_a_message(tmp_path, port):
    """int() took "8_000" (port 8000), "+80" and "٣" (port 3)."""
    done = start_up(["-m", "config.embedded"], PORT=port, VAR_DIR=str(tmp_path))
    assert done.returncode == 2
    assert f"PORT must be a number from 1 to 65535, not {port!r}." in done.stdout
    assert not (tmp_path / "run.lock").exists()  # stopped before it took the instance lock


def test_a_blank_port_is_make_runs_default(tmp_path):
    """PORT=" " was refused as "not a number", where a blank value is the default."""
    with socket.create_server(("127.0.0.1", 8000)) if port_free(8000) else nullcontext():
        done = start_up(["-m", "config.embedded"], PORT=" ", VAR_DIR=str(tmp_path))
    assert done.returncode == 1
    assert "Port 8000 is in use by another program" in done.stdout


def port_free(port: int) -> bool:
    try:
        socket.create_server(("127.0.0.1", port)).close()
    except OSError:
        return False
    return True


def settings_of(tmp_path, **env: str) -> dict[str, str]:
    """repr() of every setting, as a fresh process started in `tmp_path` with `env` reads them
    (the variables this page documents unset unless given; the state under tmp_path)."""
    documented = variables_documented() | {"TEST_DATABASE_NAME"}
    clean = {
        k: v for k, v in os.environ.items() if not k.startswith("PYTEST") and k not in documented
    }
    # A fixed hash seed: a frozenset's repr follows it.
    base = {
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "SECRET_KEY": "x",
        "VAR_DIR": str(tmp_path / "var"),
        "PYTHONHASHSEED": "0",
    }
    code = (
        f"import sys, json; sys.path.insert(0, {str(BASE_DIR)!r}); import django; django.setup(); "
        "from django.conf import settings as s; "
        "print(json.dumps({k: repr(getattr(s, k)) for k in dir(s) if k.isupper()}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env={**clean, **base, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def test_every_variable_set_empty_means_its_default(tmp_path):
    """`X=` (a compose file's or a script's unset variable) is the default, for every variable
    the settings read: DATABASE_URL= failed with "Scheme '://' is unknown", LOG_LEVEL= with
    "Unable to configure root logger", MCP_ALLOWED_ORIGINS= refused every browser origin."""
    empty = {name: "" for name in variables_documented()} | {"TEST_DATABASE_NAME": ""}
    del empty["DJANGO_SETTINGS_MODULE"], empty["SECRET_KEY"], empty["VAR_DIR"]
    assert settings_of(tmp_path, **empty) == settings_of(tmp_path)


def test_an_empty_var_dir_means_the_default_not_the_current_directory(tmp_path):
    """VAR_DIR= kept the state in the current directory (`Path("")`), while `make run`
    (config/embedded.py) uses var/ in the checkout: static files, broker and database landed
    wherever the command was started."""
    read = settings_of(tmp_path, VAR_DIR="", DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}")
    assert read["VAR_DIR"] == repr(BASE_DIR / "var")
    assert not (tmp_path / "static").exists()


def test_log_level_is_taken_in_any_case(tmp_path):
    read = settings_of(tmp_path, LOG_LEVEL="debug")
    assert "'root': {'handlers': ['console'], 'level': 'DEBUG'}" in read["LOGGING"]


def test_a_pool_min_size_above_its_max_stops_start_up_naming_both():
    """psycopg_pool refused it only at the first query: a 500 on every request, /healthz too."""
    done = start_up(
        ["manage.py", "check"],
        DJANGO_SETTINGS_MODULE="config.settings",
        DATABASE_URL="postgres://postgres@127.0.0.1:5432/test",
        DATABASE_POOL="true",
        DATABASE_POOL_MIN_SIZE="30",
        DATABASE_POOL_MAX_SIZE="",
    )
    assert done.returncode != 0
    assert (
        "ImproperlyConfigured: DATABASE_POOL_MIN_SIZE (30) must not exceed "
        "DATABASE_POOL_MAX_SIZE (20)." in done.stderr
    ), done.stderr[-800:]


@pytest.mark.parametrize(
    "url",
    [
        "redis://127.0.0.1:6379/0",
        "rediss://cache.example.com/0",
        "Redis://127.0.0.1/0",
        "redis+socket:///run/redis/redis.sock",
        "sentinel://10.0.0.1:26379;sentinel://10.0.0.2:26379",
        "sqs://",
    ],
)
def test_every_broker_that_redelivers_after_a_visibility_timeout_is_checked(settings, url):
    """Redis through a socket or Sentinel, and SQS, re-deliver unacked work as Redis does: a
    visibility timeout shorter than a run let a run still working be delivered twice, unchecked."""
    from organization.schedules import check_visibility_outlasts

    settings.CELERY_BROKER_URL = url
    settings.CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 600}
    settings.RUNTIME_RUN_TIME_LIMIT = 1800
    with pytest.raises(ImproperlyConfigured, match="RUNTIME_RUN_TIME_LIMIT"):
        check_visibility_outlasts("RUNTIME_RUN_TIME_LIMIT", "runs")
    settings.CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600}
    check_visibility_outlasts("RUNTIME_RUN_TIME_LIMIT", "runs")


@pytest.mark.parametrize("url", ["filesystem://", "amqp://guest@127.0.0.1//", "memory://"])
def test_brokers_without_a_visibility_timeout_are_not_checked(settings, url):
    from organization.schedules import check_visibility_outlasts

    settings.CELERY_BROKER_URL = url
    settings.CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 10}
    settings.RUNTIME_RUN_TIME_LIMIT = 1800
    check_visibility_outlasts("RUNTIME_RUN_TIME_LIMIT", "runs")


def test_a_sentinel_broker_is_a_redis_broker_for_prefetch_too(tmp_path):
    """CELERY_WORKER_DISABLE_PREFETCH ("Redis broker only") is on for Redis reached through
    Sentinel too: kombu's sentinel:// transport is its Redis transport."""
    read = settings_of(tmp_path, CELERY_BROKER_URL="sentinel://127.0.0.1:26379")
    assert read.get("CELERY_WORKER_DISABLE_PREFETCH") == "True"


@pytest.mark.parametrize(
    "code",
    [
        "import config.wsgi",
        "import config.asgi",
        "from config.celery import app; from django.conf import settings; settings.INSTALLED_APPS",
    ],
)
def test_an_empty_settings_module_means_the_default_for_every_entry_point(code):
    """DJANGO_SETTINGS_MODULE= (a compose file's unset variable) is config.settings, as every
    empty variable is its default: setdefault kept the empty value, and Django stopped with
    "settings are not configured"."""
    done = start_up(["-c", code], DJANGO_SETTINGS_MODULE="")
    assert done.returncode == 0, done.stderr[-1500:]


def test_an_empty_settings_module_means_the_default_for_manage_py():
    done = start_up(["manage.py", "check"], DJANGO_SETTINGS_MODULE="")
    assert done.returncode == 0, done.stderr[-1500:]


def test_a_var_dir_that_cannot_be_made_stops_start_up_naming_it(tmp_path):
    """VAR_DIR naming a file (or a directory this user cannot write) ended every command in a
    mkdir traceback (NotADirectoryError from the settings, FileExistsError from `make run`)."""
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    done = start_up(
        ["manage.py", "check"], DJANGO_SETTINGS_MODULE="config.settings", VAR_DIR=str(not_a_dir)
    )
    assert done.returncode != 0
    assert (
        f"ImproperlyConfigured: VAR_DIR={str(not_a_dir)!r}: cannot create {not_a_dir}/static: "
        "Not a directory. Set VAR_DIR to a directory this user can write." in done.stderr
    ), done.stderr[-800:]
    done = start_up(["-m", "config.embedded"], VAR_DIR=str(not_a_dir), PORT="8000")
    assert done.returncode == 2
    assert "Traceback" not in done.stderr, done.stderr[-800:]
    assert f"VAR_DIR {not_a_dir} cannot be used: it is not a directory." in done.stdout


@pytest.mark.parametrize(
    "url, message",
    [
        (
            "mongodb://admin:s3cr3t-pw@db.example.com/agents",
            "DATABASE_URL: unknown scheme mongodb://: use postgres://, postgresql:// or sqlite:///",
        ),
        ("postgres", "DATABASE_URL: unknown scheme (none): use postgres://"),
        (
            "postgres://admin:s3cr3t-pw@db.example.com:5432x/agents",
            "DATABASE_URL is not a URL dj-database-url can read",
        ),
        ("sqlite://", "DATABASE_URL: an SQLite URL needs a file"),
    ],
)
def test_a_database_url_it_cannot_use_stops_start_up_naming_it_not_its_password(url, message):
    """An unknown scheme (or none) ended in dj-database-url's UnknownSchemeError traceback, a bad
    port in a ParseError naming no variable; `sqlite://` gave each process (server, worker, beat)
    an empty in-memory database of its own."""
    done = start_up(
        ["manage.py", "check"], DJANGO_SETTINGS_MODULE="config.settings", DATABASE_URL=url
    )
    assert done.returncode != 0
    assert f"ImproperlyConfigured: {message}" in done.stderr, done.stderr[-800:]
    assert "s3cr3t-pw" not in done.stderr + done.stdout


@pytest.mark.parametrize("scheme", ["postgres", "postgresql"])
def test_both_postgresql_schemes_are_postgresql(tmp_path, scheme):
    read = settings_of(tmp_path, DATABASE_URL=f"{scheme}://postgres@127.0.0.1:5432/agent_org")
    assert "'ENGINE': 'config.postgresql'" in read["DATABASES"]
    assert "'NAME': 'agent_org'" in read["DATABASES"]


@pytest.mark.parametrize(
    "url, scheme",
    [
        ("sentinel://:s3cr3t-pw@10.0.0.1:26379", "sentinel://"),
        ("redis+socket:///run/redis/redis.sock", "redis+socket://"),
        ("unix:///run/redis/redis.sock", "unix://"),
        ("127.0.0.1:6379", "(none)"),
    ],
)
def test_a_redis_url_the_cache_cannot_read_stops_start_up(url, scheme):
    """The broker (kombu) took sentinel:// and redis+socket://, the cache (redis-py) refused
    them on every request, and the throttle, which lets a request through when its cache fails,
    was quietly off (unix:// the other way round: the cache worked, the broker did not)."""
    done = start_up(
        ["manage.py", "check"],
        DJANGO_SETTINGS_MODULE="config.settings",
        REDIS_URL=url,
        CELERY_BROKER_URL="",
    )
    assert done.returncode != 0
    assert (
        f"ImproperlyConfigured: REDIS_URL: scheme {scheme} is not redis:// or rediss://"
        in done.stderr
    ), done.stderr[-800:]
    assert "s3cr3t-pw" not in done.stderr + done.stdout


def test_a_redis_url_in_capitals_is_one_for_the_cache_too(tmp_path):
    """Redis://… worked for the broker (kombu) and failed every cache call (redis-py)."""
    read = settings_of(tmp_path, REDIS_URL="Redis://127.0.0.1:6379/8")
    assert "'LOCATION': 'redis://127.0.0.1:6379/8'" in read["CACHES"]
    assert read["CELERY_BROKER_URL"] == "'redis://127.0.0.1:6379/8'"
