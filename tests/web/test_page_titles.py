"""Every page has a title of its own, "<what> · <site name>": never the bare site name twice, and
never the host and port the request came to (Django's login view puts those in `site_name`)."""

import re

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

pytestmark = pytest.mark.django_db

SITE = "ParallelKernelBench"
# Named routes that are not HTML pages: actions (POST), the live partial, a text download.
NOT_PAGES = {"logout", "revoke-token", "register-model", "vouch", "submission-status", "prompt"}


def named_routes(patterns=None, namespace="") -> set[str]:
    """The site's own named routes (not the admin's or the API's: those are checked below)."""
    names = set()
    for p in patterns if patterns is not None else get_resolver().url_patterns:
        if isinstance(p, URLResolver):
            if p.namespace in ("admin", "api"):
                continue
            names |= named_routes(p.url_patterns, namespace)
        elif isinstance(p, URLPattern) and p.name:
            names.add(p.name)
    return names


def title(html: str) -> str:
    return re.search(r"<title>(.*?)</title>", html, re.S).group(1).strip()


@pytest.fixture
def site(client, judged, user, problem, cpu, h200, admin_user):
    from casestudies.models import CaseStudy

    ev = judged(user, problem, cpu)
    CaseStudy.objects.create(title="Ring all-reduce", slug="ring", body="text", published=True)
    return {
        "catalog": ("/", "Multi-GPU kernel problems and results"),
        "problem": ("/problems/allreduce/", "All-reduce"),
        "leaderboard": ("/problems/allreduce/leaderboard/cpu/", "All-reduce on cpu"),
        "compare-models": ("/compare/models/?hardware=cpu", "Model comparison"),
        "compare-hardware": ("/compare/hardware/?a=cpu&b=h200x4", "Hardware comparison"),
        "case-studies": ("/case-studies/", "Case studies"),
        "case-study": ("/case-studies/ring/", "Ring all-reduce"),
        "submission": (f"/submissions/{ev.submission_id}/", f"Submission {ev.submission_id}"),
        "submit": ("/submit/", "Submit"),
        "my-submissions": ("/submissions/", "My submissions"),
        "account": ("/accounts/", "Account"),
        "login": ("/accounts/login/", "Log in"),
        "signup": ("/accounts/signup/", "Sign up"),
    }


def test_every_page_is_titled_after_what_it_shows(client, site, user):
    assert set(site) == named_routes() - NOT_PAGES, "a new page: add it here with its title"
    for name, (path, expected) in site.items():
        if name in ("login", "signup"):
            client.logout()
        else:
            client.force_login(user)
        response = client.get(path, HTTP_HOST="127.0.0.1:8000")
        assert response.status_code == 200, path
        assert title(response.content.decode()) == f"{expected} · {SITE}", path


def test_the_login_page_names_the_site_not_the_host(client, db):
    html = client.get("/accounts/login/", HTTP_HOST="127.0.0.1:8000").content.decode()
    assert "127.0.0.1:8000" not in html
    assert f'class="brand" href="/">{SITE}</a>' in html


def test_admin_and_api_docs_are_titled_with_the_site(client, admin_user):
    client.force_login(admin_user)
    assert title(client.get("/admin/").content.decode()).endswith(f"| {SITE} admin")
    assert title(client.get("/admin/casestudies/casestudy/add/").content.decode()).startswith("Add case study")
    assert SITE in title(client.get("/api/docs").content.decode())
