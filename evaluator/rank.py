"""Entry point of a rank process; the harness lives in evaluator.harness (importable, so its
classes are the same objects everywhere)."""

import sys

from evaluator.harness import main

sys.exit(main(sys.argv[1:]))
