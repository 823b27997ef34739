"""The one exception to "no import cycles" is HackSoft's, and only that (docs/design.md "Layers").

`lint-imports` (in `make test`) checks the contracts of pyproject's [tool.importlinter]; the
"acyclic" contract ignores the imports listed in its `ignore_imports`, the single list of
exceptions. import-linter cannot say *where* an import sits, so this test does: each listed
import must be made inside a function (the Celery task's body), never at module level, where it
would be an ordinary cycle.
"""

import ast
import importlib.util
import tomllib
from pathlib import Path

import grimp
import pytest

BASE_DIR = Path(__file__).resolve().parents[1]
CONFIG = tomllib.loads((BASE_DIR / "pyproject.toml").read_text())["tool"]["importlinter"]
ACYCLIC = next(c for c in CONFIG["contracts"] if c["id"] == "acyclic")
EXCEPTIONS = [
    tuple(part.strip() for part in line.split("->")) for line in ACYCLIC["ignore_imports"]
]


@pytest.fixture(scope="module")
def graph():
    return grimp.build_graph(*CONFIG["root_packages"], cache_dir=None)


def function_level_lines(path: Path) -> set[int]:
    """Line numbers of the import statements of `path` that sit inside a function."""
    lines = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for inner in ast.walk(node):
                if isinstance(inner, ast.Import | ast.ImportFrom):
                    lines.add(inner.lineno)
    return lines


def test_the_exceptions_name_modules_exactly():
    for importer, imported in EXCEPTIONS:
        assert "*" not in importer + imported, f"{importer} -> {imported}: no wildcards"


@pytest.mark.parametrize("importer, imported", EXCEPTIONS, ids=[" -> ".join(e) for e in EXCEPTIONS])
def test_an_excepted_import_sits_inside_the_task_body(graph, importer, imported):
    details = graph.get_import_details(importer=importer, imported=imported)
    if not details:
        pytest.fail(f"{importer} no longer imports {imported}: drop the line from ignore_imports")
    inside = function_level_lines(Path(importlib.util.find_spec(importer).origin))
    at_module_level = [d for d in details if d["line_number"] not in inside]
    assert at_module_level == [], (
        f"{importer} imports {imported} at module level: move the import into the task body "
        f"(HackSoft), or the cycle is a real one: {at_module_level}"
    )


def test_the_check_tells_a_task_body_import_from_a_module_level_one(tmp_path):
    module = tmp_path / "tasks.py"
    module.write_text(
        "from . import runner\n"
        "\n"
        "def run(session_id):\n"
        "    from .services import session_run\n"
        "    return session_run(session_id)\n"
    )
    assert function_level_lines(module) == {4}
