#!/usr/bin/env python
"""Django's command-line utility. `platform/` is the web application's import root (not a package)."""

import os
import sys
from pathlib import Path


def main() -> None:
    root = Path(__file__).resolve().parent
    sys.path[:0] = [str(root / "platform"), str(root)]
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pkb_site.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
