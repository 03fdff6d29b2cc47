import sys

from pkbcli.cli import main

sys.exit(main())
