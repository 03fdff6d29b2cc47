"""Case studies: a Markdown write-up linked to the evaluations it discusses.

The table keeps the name it had under the submissions app (submissions_casestudy, and
submissions_casestudy_evaluations for the links): the move was a change of Django's state only
(migrations casestudies 0001 and submissions 0007)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils import timezone

from submissions.models import Evaluation


class CaseStudy(models.Model):
    title = models.CharField(max_length=200)
    slug = models.SlugField(max_length=200, unique=True)
    body = models.TextField(help_text="Markdown; HTML is sanitized")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL)
    published = models.BooleanField(default=False)
    evaluations = models.ManyToManyField(Evaluation, blank=True, related_name="case_studies")
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "submissions_casestudy"
        ordering = ("-created_at",)
        verbose_name_plural = "case studies"

    def __str__(self) -> str:
        return self.title

    def get_absolute_url(self) -> str:
        return reverse("case-study", args=[self.slug])
