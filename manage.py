#!/usr/bin/env python
import os
import sys


def main() -> None:
    if sys.argv[1:2] == ["test"]:
        # The suite's settings (a test-only SECRET_KEY), as `pytest` uses them.
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
