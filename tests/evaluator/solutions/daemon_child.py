import os
import sys

import torch.distributed as dist

MARKER = "pkb-daemon-test-marker"


def solution(tensor):
    # Leaves a detached grandchild behind, in its own session, that would sleep for ten minutes;
    # the marker in its command line lets the test look for it on the host.
    if not os.environ.get("_SPAWNED"):
        os.environ["_SPAWNED"] = "1"
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(600)", MARKER])
            os._exit(0)
    dist.all_reduce(tensor)
    return tensor
