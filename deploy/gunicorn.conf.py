"""gunicorn settings for the web application: `gunicorn -c deploy/gunicorn.conf.py pkb_site.wsgi`.

Sync workers: pages are short database reads, and live status is HTMX polling (no long-lived
connections). Every value can be overridden from the environment (PKB_WEB_*) or the command line.
"""

import multiprocessing
import os
import sys
from pathlib import Path

# platform/ is an import root, never a package (a package named `platform` shadows the standard library).
_platform = str(Path(__file__).resolve().parent.parent / "platform")
if _platform not in sys.path:
    sys.path.insert(0, _platform)
pythonpath = _platform

bind = os.environ.get("PKB_WEB_BIND") or "0.0.0.0:8000"
workers = int(os.environ.get("PKB_WEB_WORKERS") or min(2 * multiprocessing.cpu_count() + 1, 9))
worker_class = "sync"
threads = 1
timeout = int(os.environ.get("PKB_WEB_TIMEOUT_S") or 60)
graceful_timeout = 30
keepalive = 5
# Recycle workers now and then, so a slow leak never grows without bound.
max_requests = 2000
max_requests_jitter = 200
forwarded_allow_ips = os.environ.get("PKB_FORWARDED_ALLOW_IPS") or "127.0.0.1"
accesslog = "-"
errorlog = "-"
loglevel = (os.environ.get("PKB_LOG_LEVEL") or "info").lower()
preload_app = False
# No runtime control socket (gunicorn 25.1+): one per user by default, so several instances would share it.
control_socket_disable = True
