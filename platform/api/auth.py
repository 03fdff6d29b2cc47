from __future__ import annotations

from django.conf import settings
from ninja.security import HttpBearer

from accounts import throttle
from accounts.models import ApiToken


def token_user(request, raw: str):
    """The user of a bearer token, or None; raises throttle.Throttled when this address sent too many
    unknown tokens (then no token is accepted from it until the hour is over: a correct guess must
    not tell) or the token's account too many requests."""
    ip = throttle.client_key(request)
    bad = throttle.bad_tokens()
    wait = bad.wait(ip)
    if wait is not None:
        raise throttle.Throttled(
            f"Too many requests with an unknown API token from your address (at most {bad.limit} an hour). "
            f"No token is accepted from it for {throttle.wait_text(wait)}.",
            wait,
        )
    user = ApiToken.objects.authenticate(raw)
    if user is None:
        bad.count(ip)
        return None
    wait = throttle.api_requests().hit(str(user.pk))
    if wait is not None:
        raise throttle.Throttled(
            f"This account made more than {settings.PKB_API_REQUESTS_PER_MINUTE} API requests in a minute. "
            f"Try again in {throttle.wait_text(wait)}.",
            wait,
        )
    return user


class TokenAuth(HttpBearer):
    """`Authorization: Bearer pkb_...`, a token from the account page."""

    def authenticate(self, request, token: str):
        user = token_user(request, token)
        if user is not None:
            request.user = user
        return user


def viewer(request):
    """Who is asking, for read endpoints that show more to owners: a bearer token, else the session."""
    header = request.headers.get("Authorization", "")
    if header.lower().startswith("bearer "):
        user = token_user(request, header.split(" ", 1)[1].strip())
        if user is not None:
            return user
    return request.user
