"""`python manage.py test` takes what Django users type: --failfast, --keepdb, dotted labels."""

import os
import subprocess
import sys
from pathlib import Path

from config.test_runner import label_to_pytest, pytest_args

ROOT = Path(__file__).resolve().parents[2]


def manage_test(*args, cwd=ROOT):
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings"}
    # The tests it runs need no database; were one created, it would not be this run's.
    if env.get("TEST_DATABASE_NAME"):
        env["TEST_DATABASE_NAME"] += "_runner"
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "test", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_dotted_labels_become_pytest_paths_and_node_ids():
    assert label_to_pytest("tests.test_schema", ROOT) == "tests/test_schema.py"
    assert label_to_pytest("tests.organization", ROOT) == "tests/organization"
    assert (
        label_to_pytest("tests.test_schema.test_the_schema_validates_without_warnings", ROOT)
        == "tests/test_schema.py::test_the_schema_validates_without_warnings"
    )
    assert label_to_pytest("tests.test_x.TestX.test_y", ROOT) == "tests.test_x.TestX.test_y"
    assert label_to_pytest("tests/test_schema.py::test_a", ROOT) == "tests/test_schema.py::test_a"


def test_django_flags_become_pytest_flags():
    options = {
        "verbosity": 2,
        "failfast": True,
        "keepdb": True,
        "test_name_patterns": ["a", "b"],
        "tags": ["worker"],
        "exclude_tags": ["e2e"],
        "durations": 5,
        "parallel": 4,
    }
    assert pytest_args(["tests.test_schema.TestX.test_y"], options, ROOT) == [
        "--verbose",
        "--exitfirst",
        "--reuse-db",
        "--durations",
        "5",
        "-k",
        "a or b",
        "-m",
        "(worker) and not e2e",
        "tests/test_schema.py::TestX::test_y",
    ]


def test_manage_py_test_runs_a_dotted_module_with_django_flags():
    result = manage_test(
        "--failfast",
        "--keepdb",
        "--noinput",
        "--parallel",
        "2",
        "-v",
        "2",
        "-k",
        "survives_openai_strict_mode",
        "tests.organization.test_tool_schemas",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "test_tool_schemas.py::test_every_tool_schema_survives_openai_strict_mode" in (
        result.stdout
    )
    assert " passed" in result.stdout and " failed" not in result.stdout
    assert "Ignored under pytest: --parallel" in result.stderr


def test_failfast_stops_at_the_first_failure(tmp_path):
    module = tmp_path / "test_two_failures.py"
    module.write_text("def test_one():\n    assert False\n\n\ndef test_two():\n    assert False\n")
    result = manage_test("--failfast", str(module))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "1 failed" in result.stdout
    assert "2 failed" not in result.stdout
