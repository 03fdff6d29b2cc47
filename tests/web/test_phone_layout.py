"""Every page fits a phone: in headless Chromium (Debian's package) at a 400x800 viewport, no page is
wider than the screen (document.documentElement.scrollWidth <= 400). Wide tables scroll inside
their own wrapper instead. Screenshots go to test-artifacts/screenshots/phone-*.png."""

import shutil
from pathlib import Path

import pytest
from django.db import connections
from django.urls import URLPattern, URLResolver, get_resolver

CHROMIUM = shutil.which("chromium")
SHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"
PASSWORD = "correct horse battery"  # the conftest users'
WIDTH = 400

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium package is not installed"),
    pytest.mark.django_db(transaction=True),
]

# Named routes that are not HTML pages: actions (POST), the live partial, a text download.
NOT_PAGES = {"logout", "revoke-token", "submission-status", "prompt", "register-model", "vouch"}
LOGGED_OUT = {"login", "signup"}  # the others are visited logged in, as their owner sees them

# The elements that stick out past the viewport, the outermost first: what a failure names.
OVERFLOWING = """(width) => {
  const out = [];
  for (const el of document.body.querySelectorAll("*")) {
    const r = el.getBoundingClientRect();
    if (r.right <= width + 0.5 || r.width === 0) continue;
    let inside = false;  // already inside a box that scrolls or clips: not the page's width
    for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
      const o = getComputedStyle(p).overflowX;
      if (o === "auto" || o === "scroll" || o === "hidden") { inside = true; break; }
      if (out.includes(p)) { inside = true; break; }
    }
    if (!inside) out.push(el);
  }
  return out.slice(0, 5).map(el => el.tagName.toLowerCase() + (el.className ? "." + el.className : "")
    + " right=" + Math.round(el.getBoundingClientRect().right));
}"""


def named_routes(patterns=None) -> set[str]:
    """The site's own named routes (not the admin's or the API's)."""
    names = set()
    for p in patterns if patterns is not None else get_resolver().url_patterns:
        if isinstance(p, URLResolver):
            if p.namespace not in ("admin", "api"):
                names |= named_routes(p.url_patterns)
        elif isinstance(p, URLPattern) and p.name:
            names.add(p.name)
    return names


@pytest.fixture
def phone(monkeypatch):
    from playwright.sync_api import sync_playwright

    # Playwright's sync API runs an event loop in this thread; the test's own ORM calls are synchronous.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"], headless=True)
        page = browser.new_page(viewport={"width": WIDTH, "height": 800})
        page.set_default_timeout(15_000)
        yield page
        browser.close()
        connections.close_all()  # Playwright's greenlet has its own database connection
    connections.close_all()


@pytest.fixture
def site(cpu, h200, judged, submit, worker, make_result, user):
    """Something on every page: the whole suite, results on two hardware, a failure, a case study, a
    token, a model name."""
    from accounts.models import ApiToken
    from casestudies.models import CaseStudy
    from catalog.models import Problem
    from catalog.sync import sync_problems

    sync_problems()
    problem, other_problem = Problem.objects.get(slug="allreduce"), Problem.objects.get(slug="allgather")
    done = judged(user, problem, cpu, speedups=(1.5, 2.0, 3.0), model_tag="gpt-5.5", interval=0.1)
    judged(user, problem, cpu, speedups=(0.8, 1.1, 1.3), model_tag="claude-opus-4.1-long-model-name")
    judged(user, other_problem, cpu, status="incorrect", model_tag="glm")
    both = submit(user, problem, [cpu, h200], model_tag="paired")
    for ev in both.evaluations.all():
        worker.finish(ev, make_result(ev, interval=0.05))
    study = CaseStudy.objects.create(
        title="All-reduce without NCCL", slug="allreduce", published=True, body="## Result\n\n**2x** at 1024x1024."
    )
    study.evaluations.add(done, *both.evaluations.all())
    ApiToken.objects.issue(user, "harness on the cluster")
    return {
        "catalog": "/",
        "problem": "/problems/allreduce/",
        "leaderboard": "/problems/allreduce/leaderboard/cpu/",
        "compare-models": "/compare/models/?hardware=cpu&hardware_b=h200x4",
        "compare-hardware": "/compare/hardware/?a=cpu&b=h200x4",
        "case-studies": "/case-studies/",
        "case-study": "/case-studies/allreduce/",
        "submission": f"/submissions/{both.pk}/",
        "submit": "/submit/?problem=allreduce",
        "my-submissions": "/submissions/",
        "account": "/accounts/",
        "login": "/accounts/login/",
        "signup": "/accounts/signup/",
    }


def test_every_page_fits_a_phone(live_server, phone, site):
    assert set(site) == named_routes() - NOT_PAGES, "a new page: add it here"
    base = live_server.url
    widths, too_wide = {}, {}
    for name in sorted(site, key=lambda n: n not in LOGGED_OUT):  # logged out first, then log in
        if name not in LOGGED_OUT and not widths.keys() - LOGGED_OUT:
            phone.goto(f"{base}/accounts/login/")
            phone.fill("#id_username", "alice")
            phone.fill("#id_password", PASSWORD)
            phone.click("form.stacked button[type=submit]")
            phone.wait_for_url(f"{base}/")
        response = phone.goto(base + site[name])
        assert response.status == 200, site[name]
        phone.wait_for_load_state("networkidle")
        widths[name] = phone.evaluate("document.documentElement.scrollWidth")
        phone.screenshot(path=str(SHOTS / f"phone-{name}.png"), full_page=True)
        if widths[name] > WIDTH:
            too_wide[name] = (widths[name], phone.evaluate(OVERFLOWING, WIDTH))
    assert too_wide == {}, f"wider than a {WIDTH} px screen: {too_wide}"
