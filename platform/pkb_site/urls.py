from django.conf import settings
from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

from api.api import api

admin.site.site_header = f"{settings.SITE_NAME} administration"
admin.site.site_title = f"{settings.SITE_NAME} admin"
admin.site.index_title = "Problems, hardware, submissions and case studies"

urlpatterns = [
    path("", include("pages.urls")),
    path("case-studies/", include("casestudies.urls")),
    path("accounts/", include("accounts.urls")),
    path("admin/", admin.site.urls),
    path("api/", api.urls),
    # Browsers ask for /favicon.ico on pages that name none (the admin's).
    path("favicon.ico", RedirectView.as_view(url=static("pkb/favicon.svg"), permanent=True)),
]
