from django.apps import AppConfig


class CaseStudiesConfig(AppConfig):
    name = "casestudies"
    verbose_name = "Case studies"
