from django.conf import settings


def site(request):
    # Not "site_name": Django's auth views (the login page) put the request's host and port there.
    return {"platform_name": settings.SITE_NAME}
