import os
import tempfile
import time

import torch.distributed as dist


def solution(tensor):
    # Leaves a detached grandchild behind, in its own session.
    if not os.environ.get("_SPAWNED"):
        os.environ["_SPAWNED"] = "1"
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                with open(os.path.join(tempfile.gettempdir(), "pkb-daemon-test.pid"), "w") as f:
                    f.write(str(os.getpid()))
                time.sleep(600)
            os._exit(0)
    dist.all_reduce(tensor)
    return tensor
