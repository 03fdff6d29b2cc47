"""Entry point of a rank's judge process; the judge lives in evaluator.judge (importable, so its
classes are the same objects everywhere)."""

import faulthandler
import signal
import sys

# Before the slow imports: on a time-out the evaluator asks each unfinished rank for every
# thread's Python stack (written into the rank's log) before it kills it.
faulthandler.register(signal.SIGUSR1, all_threads=True)

from evaluator.judge import main  # noqa: E402

sys.exit(main(sys.argv[1:]))
