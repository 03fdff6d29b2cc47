from __future__ import annotations

from ninja.security import HttpBearer

from accounts.models import ApiToken


class TokenAuth(HttpBearer):
    """`Authorization: Bearer pkb_...`, a token from the account page."""

    def authenticate(self, request, token: str):
        user = ApiToken.objects.authenticate(token)
        if user is not None:
            request.user = user
        return user


def viewer(request):
    """Who is asking, for read endpoints that show more to owners: a bearer token, else the session."""
    header = request.headers.get("Authorization", "")
    if header.lower().startswith("bearer "):
        user = ApiToken.objects.authenticate(header.split(" ", 1)[1].strip())
        if user is not None:
            return user
    return request.user
