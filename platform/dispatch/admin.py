from django.contrib import admin

from dispatch.models import WorkerPresence


@admin.register(WorkerPresence)
class WorkerPresenceAdmin(admin.ModelAdmin):
    list_display = ("name", "hardware", "online", "alive", "last_seen", "first_seen", "interval_s")
    list_filter = ("hardware", "online")
    search_fields = ("name", "hardware")
    readonly_fields = ("name", "hardware", "online", "interval_s", "first_seen", "last_seen")

    @admin.display(boolean=True, description="serving now")
    def alive(self, obj: WorkerPresence) -> bool:
        return obj.alive()

    def has_add_permission(self, request):
        return False
