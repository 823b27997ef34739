"""`python manage.py test` runs the pytest suite, so there is one suite and one runner: Django's
flags and dotted labels are translated to pytest's; flags with no pytest meaning are ignored."""

import sys
from pathlib import Path

# Django's DiscoverRunner flags that pytest has no equivalent for here: (flags, argparse kwargs).
IGNORED = [
    (("--parallel",), {"nargs": "?", "const": "auto", "metavar": "N"}),
    (("--shuffle",), {"nargs": "?", "const": True, "metavar": "SEED"}),
    (("-r", "--reverse"), {"action": "store_true"}),
    (("-d", "--debug-mode"), {"action": "store_true"}),
    (("--debug-sql",), {"action": "store_true"}),
    (("-b", "--buffer"), {"action": "store_true"}),
    (("--timing",), {"action": "store_true"}),
    (("-t", "--top-level-directory"), {}),
    (("-p", "--pattern"), {}),
]


def label_to_pytest(label: str, root: Path | None = None) -> str:
    """A Django test label as a pytest path or node id; paths and node ids pass as they are."""
    root = root or Path.cwd()
    if "/" in label or "::" in label or label.endswith(".py") or (root / label).exists():
        return label
    parts = label.split(".")
    for i in range(len(parts), 0, -1):
        path = "/".join(parts[:i])
        if (root / f"{path}.py").is_file():
            return "::".join([f"{path}.py", *parts[i:]])
        if i == len(parts) and (root / path).is_dir():
            return path
    return label  # pytest names what it cannot find


def pytest_args(test_labels, options: dict, root: Path | None = None) -> list[str]:
    argv = []
    verbosity = options.get("verbosity", 1)
    if verbosity == 0:
        argv.append("--quiet")
    elif verbosity > 1:
        argv.append("--verbose")
    if options.get("failfast"):
        argv.append("--exitfirst")
    if options.get("keepdb"):
        argv.append("--reuse-db")
    if options.get("pdb"):
        argv.append("--pdb")
    if options.get("durations") is not None:
        argv += ["--durations", str(options["durations"])]
    if options.get("test_name_patterns"):
        argv += ["-k", " or ".join(options["test_name_patterns"])]
    markers = [*(options.get("tags") or [])]
    excluded = [f"not {tag}" for tag in options.get("exclude_tags") or []]
    if markers or excluded:
        chosen = f"({' or '.join(markers)})" if markers else ""
        argv += ["-m", " and ".join(filter(None, [chosen, *excluded]))]
    argv += [label_to_pytest(label, root) for label in test_labels]
    return argv


class PytestRunner:
    def __init__(self, **options):
        self.options = options

    @classmethod
    def add_arguments(cls, parser):
        parser.add_argument("--failfast", action="store_true", help="Stop at the first failure.")
        parser.add_argument("--keepdb", action="store_true", help="Reuse the test database.")
        parser.add_argument(
            "-k", action="append", dest="test_name_patterns", help="Only tests matching this."
        )
        parser.add_argument("--tag", action="append", dest="tags", help="Only this marker.")
        parser.add_argument(
            "--exclude-tag", action="append", dest="exclude_tags", help="Not this marker."
        )
        parser.add_argument("--pdb", action="store_true", help="Debugger on failure.")
        parser.add_argument("--durations", type=int, help="Show the N slowest tests.")
        for flags, kwargs in IGNORED:
            parser.add_argument(*flags, help="Accepted; ignored under pytest.", **kwargs)

    def run_tests(self, test_labels, **kwargs) -> int:
        import pytest

        given = [flags[-1] for flags, _ in IGNORED if self.options.get(_dest(flags))]
        if given:
            print(f"Ignored under pytest: {', '.join(given)}", file=sys.stderr)
        sys.exit(pytest.main(pytest_args(test_labels, self.options)))


def _dest(flags: tuple[str, ...]) -> str:
    return flags[-1].lstrip("-").replace("-", "_")
