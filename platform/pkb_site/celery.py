"""The web side's Celery app: Django-aware, consumes the web queue (results, progress, the reaper).

    celery -A pkb_site worker -Q web      # the web-side worker
    celery -A pkb_site beat               # the scheduler (the reaper)

Its settings are the CELERY_* names of pkb_site/settings.py (see pkb_site/celery_config.py).
"""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pkb_site.settings")

app = Celery("pkb")
# The current app of every thread: the dispatch app publishes (current_app) and declares its tasks
# (shared_task) without importing this project package.
app.set_default()
app.config_from_object("django.conf:settings", namespace="CELERY")
# The dispatch tasks are named explicitly so they register even before dispatch is an installed app.
app.autodiscover_tasks(["dispatch"])
