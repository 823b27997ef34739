"""CI check: a production install (`pip install .`, no dev extras) queues and runs real work.

Installs the project without its dev extras into var/prod-venv, then, from that venv only, runs
the migrations on a database of its own, a `celery worker -B` and a gunicorn server on the Redis
of REDIS_URL, and starts a collaboration and a task with a webhook over HTTP: both must be done by
the worker. A runtime dependency that only the dev extras pull in (kombu's Redis transport needs
`packaging`) makes a call answer 500 here, or the worker fail, and so fails CI.

    env $(cat var/test-env | xargs) python3 tests/prod_install_check.py

DATABASE_URL (PostgreSQL; a database `<name>_prod_check` is made next to it and dropped after)
and REDIS_URL come from the environment, as `make test` finds them.
"""

import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / "var" / "prod-venv"
PY = VENV / "bin" / "python"
DEADLINE_SECONDS = 120


def log(message: str) -> None:
    print(f"prod-install-check: {message}", flush=True)


def run(*args, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=ROOT, check=True, **kwargs)


def install() -> None:
    stamp = VENV / f".installed-{hash_of(ROOT / 'pyproject.toml')}"
    if stamp.exists():
        return
    log(f"installing the project without dev extras into {VENV.relative_to(ROOT)}")
    run(sys.executable, "-m", "venv", "--clear", str(VENV))
    run(str(PY), "-m", "pip", "install", "-q", ".")
    stamp.touch()


def hash_of(path: Path) -> str:
    import hashlib

    return hashlib.sha1(path.read_bytes()).hexdigest()[:12]


def database_urls(url: str) -> tuple[str, str, str]:
    """(the check's database URL, its name, the maintenance database URL)."""
    parts = urlsplit(url)
    if parts.scheme not in ("postgres", "postgresql"):
        raise SystemExit("prod-install-check: DATABASE_URL must be PostgreSQL")
    name = parts.path.lstrip("/") + "_prod_check"
    return (
        urlunsplit(parts._replace(path=f"/{name}")),
        name,
        urlunsplit(parts._replace(path="/postgres")),
    )


def psql(admin_url: str, sql: str) -> None:
    # Through the production venv's psycopg: it is a runtime dependency too.
    code = (
        "import sys, psycopg\n"
        "with psycopg.connect(sys.argv[1], autocommit=True) as c: c.execute(sys.argv[2])"
    )
    run(str(PY), "-c", code, admin_url, sql)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Hook(BaseHTTPRequestHandler):
    received: list = []

    def do_POST(self):
        Hook.received.append(self.rfile.read(int(self.headers["Content-Length"])))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


def call(base: str, key: str, method: str, path: str, body=None) -> tuple[int, dict]:
    request = urllib.request.Request(
        base + path,
        method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as error:
        return error.code, {"body": error.read()[:2000].decode(errors="replace")}


def wait_for(predicate, what: str, timeout: float = DEADLINE_SECONDS):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"{what}: not within {timeout} s")


def main() -> int:
    started = time.monotonic()
    for var in ("DATABASE_URL", "REDIS_URL"):
        if not os.environ.get(var):
            raise SystemExit(f"prod-install-check: {var} is not set")
    install()
    db_url, db_name, admin_url = database_urls(os.environ["DATABASE_URL"])
    logs = ROOT / "var" / "prod-check"
    logs.mkdir(parents=True, exist_ok=True)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYTEST", "VIRTUAL_ENV", "TEST_DATABASE"))
    }
    env.update(
        DATABASE_URL=db_url,
        LLM_PROVIDER="offline",
        VAR_DIR=str(logs),
        WEBHOOK_ALLOW_PRIVATE_NETWORKS="true",
        PATH=f"{VENV / 'bin'}:{env.get('PATH', '')}",
    )
    psql(admin_url, f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')
    psql(admin_url, f'CREATE DATABASE "{db_name}"')
    processes = []
    hook = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=hook.serve_forever, daemon=True).start()
    try:
        run(str(PY), "manage.py", "migrate", "--noinput", "-v", "0", env=env)
        run(
            str(PY),
            "manage.py",
            "seed_demo",
            "--org",
            "prod-check",
            env=env,
            stdout=subprocess.DEVNULL,
        )
        key = (
            run(
                str(PY),
                "manage.py",
                "create_api_key",
                "--org",
                "prod-check",
                env=env,
                capture_output=True,
                text=True,
            )
            .stdout.strip()
            .splitlines()[-1]
        )
        port = free_port()
        for name, argv in (
            (
                "worker",
                [
                    str(VENV / "bin" / "celery"),
                    "-A",
                    "config",
                    "worker",
                    "-B",
                    "-P",
                    "threads",
                    "-c",
                    "2",
                    "-l",
                    "info",
                    "--schedule",
                    str(logs / "beat-schedule"),
                ],
            ),
            (
                "server",
                [
                    str(VENV / "bin" / "gunicorn"),
                    "config.wsgi",
                    "-b",
                    f"127.0.0.1:{port}",
                    "-w",
                    "2",
                ],
            ),
        ):
            out = open(logs / f"{name}.log", "wb")  # noqa: SIM115 (closed with the process)
            processes.append(
                (
                    name,
                    subprocess.Popen(
                        argv,
                        cwd=ROOT,
                        env=env,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    ),
                )
            )
        base = f"http://127.0.0.1:{port}"

        def server_up():
            try:
                return call(base, key, "GET", "/api/roster?filter=all")[0] == 200
            except OSError:
                return False

        wait_for(server_up, "the server answers")
        status, agents = call(base, key, "GET", "/api/agents")
        assert status == 200, (status, agents)
        handle = agents["results"][0]["id"]
        hook_url = f"http://127.0.0.1:{hook.server_port}/hook"
        run(
            str(PY),
            "manage.py",
            "shell",
            "-c",
            f"from organization.models import Agent; Agent.objects.filter("
            f"organization__slug='prod-check', handle='{handle}').update(webhook_url='{hook_url}')",
            env=env,
        )

        status, session = call(
            base,
            key,
            "POST",
            "/api/collaborations",
            {
                "task": "Is the production install complete?",
                "synthesis": "merge",
                "agents": [
                    {"name": "a", "role": "checker", "focus": "dependencies"},
                    {"name": "b", "role": "checker", "focus": "the broker"},
                ],
            },
        )
        assert status == 202, (status, session)
        status, task = call(
            base, key, "POST", "/api/tasks", {"title": "Check the install", "agent_id": handle}
        )
        assert status == 201, (status, task)

        def session_done():
            body = call(base, key, "GET", f"/api/collaborations/{session['id']}")[1]
            return body if body.get("status") in ("completed", "failed", "cancelled") else None

        body = wait_for(session_done, "the collaboration is done by the worker")
        assert body["status"] == "completed", body
        wait_for(lambda: Hook.received, "the task's webhook is delivered by the worker")
        log(
            f"ok in {time.monotonic() - started:.0f} s: a collaboration ran and a webhook was "
            "delivered from an install without dev extras"
        )
        return 0
    except (AssertionError, subprocess.CalledProcessError) as error:
        log(f"FAILED: {error}")
        for name, _ in processes:
            print(
                f"--- {name}.log (last lines)\n"
                + (logs / f"{name}.log").read_text(errors="replace")[-4000:]
            )
        return 1
    finally:
        for _, process in processes:
            process.terminate()
        for _, process in processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, 9)
                process.wait()
        hook.shutdown()
        psql(admin_url, f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')


if __name__ == "__main__":
    sys.exit(main())
