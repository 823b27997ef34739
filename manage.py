#!/usr/bin/env python
import os
import sys


def main() -> None:
    # Unset or blank is the default, as for every variable (a compose file's `VAR=` is blank);
    # `test` takes the suite's settings (a test-only SECRET_KEY), as `pytest` does.
    if not os.environ.get("DJANGO_SETTINGS_MODULE", "").strip():
        default = "tests.settings" if sys.argv[1:2] == ["test"] else "config.settings"
        os.environ["DJANGO_SETTINGS_MODULE"] = default
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
