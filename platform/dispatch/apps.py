from django.apps import AppConfig

from submissions.signals import evaluations_queued

PUBLISH_QUEUED = "dispatch.publish.publish_queued"


class DispatchConfig(AppConfig):
    name = "dispatch"
    verbose_name = "Dispatch to GPU workers"

    def ready(self):
        from dispatch.publish import publish_queued  # loads models: not before the registry is ready

        evaluations_queued.connect(publish_queued, dispatch_uid=PUBLISH_QUEUED)
