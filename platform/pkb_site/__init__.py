# The Celery app loads with Django so that tasks declared with @shared_task bind to it.
from pkb_site.celery import app as celery_app

__all__ = ("celery_app",)
