"""`python manage.py test` runs the pytest suite, so there is one suite and one runner."""

import sys


class PytestRunner:
    def __init__(self, verbosity=1, failfast=False, keepdb=False, **kwargs):
        self.verbosity = verbosity
        self.failfast = failfast
        self.keepdb = keepdb

    def run_tests(self, test_labels, **kwargs) -> int:
        import pytest

        argv = []
        if self.verbosity == 0:
            argv.append("--quiet")
        elif self.verbosity > 1:
            argv.append("--verbose")
        if self.failfast:
            argv.append("--exitfirst")
        if self.keepdb:
            argv.append("--reuse-db")
        argv.extend(test_labels)
        sys.exit(pytest.main(argv))
