from django.contrib import admin

from casestudies.models import CaseStudy


@admin.register(CaseStudy)
class CaseStudyAdmin(admin.ModelAdmin):
    list_display = ("title", "slug", "author", "published", "updated_at")
    list_filter = ("published",)
    prepopulated_fields = {"slug": ("title",)}
    raw_id_fields = ("evaluations",)
    search_fields = ("title", "body")

    def get_form(self, request, obj=None, change=False, **kwargs):
        form = super().get_form(request, obj, change, **kwargs)
        # The model allows no author (kept when its account is deleted); left empty here, it is
        # whoever saves the study (save_model).
        form.base_fields["author"].required = False
        form.base_fields["author"].help_text = "empty: you"
        return form

    def save_model(self, request, obj, form, change):
        if obj.author_id is None:
            obj.author = request.user
        super().save_model(request, obj, form, change)
