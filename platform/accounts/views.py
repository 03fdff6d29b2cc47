from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from accounts import throttle
from accounts.forms import SignUpForm, TokenForm
from accounts.models import ApiToken


def signup(request: HttpRequest) -> HttpResponse:
    if request.user.is_authenticated:
        return redirect("account")
    if request.method == "POST":
        wait = throttle.signups().hit(throttle.client_key(request))
        if wait is not None:
            limit = settings.PKB_SIGNUPS_PER_HOUR
            message = f"Too many sign-ups from your address (at most {limit} an hour). Try again in {throttle.wait_text(wait)}."
            return throttle.too_many(request, message, wait)
    form = SignUpForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        user = form.save()
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        messages.success(request, f"Welcome, {user.username}.")
        return redirect("catalog")
    return render(request, "registration/signup.html", {"form": form})


@login_required
def account(request: HttpRequest) -> HttpResponse:
    form = TokenForm(request.POST or None)
    new_token = None
    if request.method == "POST" and form.is_valid():
        _, new_token = ApiToken.objects.issue(request.user, form.cleaned_data["name"])
        form = TokenForm()
    tokens = request.user.api_tokens.all()
    return render(request, "accounts/account.html", {"form": form, "tokens": tokens, "new_token": new_token})


@login_required
@require_POST
def revoke(request: HttpRequest, pk: int) -> HttpResponse:
    token = get_object_or_404(ApiToken, pk=pk, user=request.user)
    token.delete()
    messages.info(request, f"Revoked {token}.")
    return redirect("account")
