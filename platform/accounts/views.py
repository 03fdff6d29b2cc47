from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from accounts import throttle
from accounts.forms import ModelNameForm, SignUpForm, TokenForm
from accounts.models import ApiToken
from submissions.models import ModelName
from submissions.services import register_model_name, vouch_for


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
    context = {
        "form": form,
        "tokens": tokens,
        "new_token": new_token,
        "model_names": request.user.model_names.prefetch_related("vouched_accounts"),
        "model_form": ModelNameForm(),
    }
    return render(request, "accounts/account.html", context)


@login_required
@require_POST
def register_model(request: HttpRequest) -> HttpResponse:
    form = ModelNameForm(request.POST)
    if form.is_valid():
        try:
            model = register_model_name(request.user, form.cleaned_data["name"])
        except ValueError as e:  # NameTaken included
            messages.error(request, f"Not registered: {e}.")
        else:
            messages.success(request, f"You own the model name {model.name}: comparisons count your runs under it.")
    else:
        messages.error(request, "Not registered: " + " ".join(form.errors.get("name", [])))
    return redirect("account")


@login_required
@require_POST
def vouch(request: HttpRequest, pk: int) -> HttpResponse:
    model = get_object_or_404(ModelName, pk=pk, owner=request.user)
    unknown = vouch_for(model, request.POST.get("accounts", "").replace(",", " ").split())
    if unknown:
        messages.error(request, f"No account is called {', '.join(unknown)}: nothing changed.")
    else:
        messages.success(request, f"Runs under {model.name} that count: yours and those of the accounts listed.")
    return redirect("account")


@login_required
@require_POST
def revoke(request: HttpRequest, pk: int) -> HttpResponse:
    token = get_object_or_404(ApiToken, pk=pk, user=request.user)
    token.delete()
    messages.info(request, f"Revoked {token}.")
    return redirect("account")
