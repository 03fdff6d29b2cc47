from django.contrib import admin

from accounts.models import ApiToken


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("user", "name", "hint", "created_at", "last_used_at")
    search_fields = ("user__username", "name")
    readonly_fields = ("key_hash", "hint", "created_at", "last_used_at")
    list_select_related = ("user",)

    def has_add_permission(self, request):  # secrets are issued on the account page, shown once
        return False
