"""In headless Chromium (Debian's package): the main pages load under the Content-Security-Policy
with no violation and no console error, htmx still swaps and the charts still draw; and a failed
evaluation's details read as the evaluator gave them, to its owner. Screenshots go to
test-artifacts/screenshots/."""

import shutil
from pathlib import Path

import pytest
from django.db import connections

CHROMIUM = shutil.which("chromium")
SHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"
PASSWORD = "correct horse battery"  # the conftest users'

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium package is not installed"),
    pytest.mark.django_db(transaction=True),
]

# Every violation of the page's policy, as the browser reports it to the page itself.
RECORD_VIOLATIONS = """
window.cspViolations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.cspViolations.push(e.violatedDirective + " " + (e.blockedURI || "inline") + " " + e.sourceFile + ":" + e.lineNumber);
});
"""


@pytest.fixture
def page(monkeypatch):
    from playwright.sync_api import sync_playwright

    # Playwright's sync API runs an event loop in this thread; the test's own ORM calls are synchronous.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"], headless=True)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.set_default_timeout(15_000)
        page.add_init_script(RECORD_VIOLATIONS)
        page.problems = []
        page.on("console", lambda m: m.type == "error" and page.problems.append(f"{page.url}: {m.text}"))
        page.on("pageerror", lambda e: page.problems.append(f"{page.url}: {e}"))
        yield page
        browser.close()
        connections.close_all()  # Playwright's greenlet has its own database connection
    connections.close_all()


def visit(page, url: str) -> None:
    response = page.goto(url)
    assert response.status == 200, url
    assert response.headers.get("content-security-policy"), url
    page.wait_for_load_state("networkidle")
    page.problems.extend(f"{url}: {v}" for v in page.evaluate("window.cspViolations"))


def log_in(page, base: str, username: str) -> None:
    page.goto(f"{base}/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("form.stacked button[type=submit]")
    page.wait_for_url(f"{base}/")


def test_main_pages_keep_their_policy_and_still_work(
    live_server, page, problem, cpu, h200, judged, submit, user, admin_user, worker, make_result
):
    from casestudies.models import CaseStudy

    done = judged(user, problem, cpu, speedups=(1.5, 2.0, 3.0), model_tag="gpt-5.5")
    judged(user, problem, cpu, status="incorrect", model_tag="glm")
    both = submit(user, problem, [cpu, h200], model_tag="paired")
    for ev in both.evaluations.all():
        worker.finish(ev, make_result(ev))
    running = submit(user, problem, cpu, model_tag="live")
    study = CaseStudy.objects.create(title="A study", slug="a-study", published=True, body="## Result\n\n**2x**.")
    study.evaluations.add(done)
    base = live_server.url
    for path in (
        "/",
        "/problems/allreduce/",
        f"/submissions/{done.submission_id}/",
        "/problems/allreduce/leaderboard/cpu/",
        "/compare/models/?hardware=cpu&hardware_b=h200x4",
        "/compare/hardware/?a=cpu&b=h200x4",
        "/case-studies/",
        "/case-studies/a-study/",
        "/api/docs",
        "/accounts/login/",
        "/accounts/signup/",
    ):
        visit(page, base + path)
    assert page.locator("canvas[data-drawn]").count() == 0  # the sign-up page has none
    visit(page, base + "/compare/models/?hardware=cpu&hardware_b=h200x4")
    assert page.locator("canvas[data-drawn]").count() == 5  # charts.js drew every chart (roof_u does not apply on the cpu)

    visit(page, base + "/")  # htmx: the search box swaps the table in place
    page.evaluate("window.notReloaded = true")
    page.locator("input[name=q]").press_sequentially("nothing matches this")  # keyup: htmx's trigger
    page.locator("#catalog-table").get_by_text("All-reduce").wait_for(state="detached")
    assert page.evaluate("window.notReloaded") is True

    log_in(page, base, "alice")
    for path in ("/submit/", "/submissions/", "/accounts/"):
        visit(page, base + path)
    visit(page, f"{base}/submissions/{running.pk}/")  # htmx polls the status and swaps it in
    worker.finish(running.evaluations.get(), make_result(running.evaluations.get()))
    page.locator('.evaluation-state[data-state="done"]').wait_for()
    page.locator("canvas[data-drawn]").first.wait_for()
    shot(page, "csp-submission-after-swap")

    log_in(page, base, "admin")
    for path in (
        "/admin/",
        "/admin/submissions/submission/",
        f"/admin/submissions/submission/{done.submission_id}/change/",
    ):
        visit(page, base + path)
    page.problems.extend(f"{page.url}: {v}" for v in page.evaluate("window.cspViolations"))
    assert page.problems == []


def shot(page, name):
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def test_a_failed_evaluation_reads_as_the_evaluator_gave_it(
    live_server, page, submit, worker, make_result, user, problem, cpu
):
    sub = submit(user, problem, cpu)
    ev = sub.evaluations.get()
    doc = make_result(
        ev, status="incorrect", reason="rank 1: output: mismatch at flat index 3089: got 0.5, expected -4.03"
    )
    doc["shapes"][0]["correct"] = True
    doc["log_tail"] = "== rank 1 ==\nwarning: first line\nsecond line of the log"
    doc["failure"] = {
        "rank": 1, "shape": "default", "step": "trial 2 of 2", "call": None, "calls": None,
        "mismatch": {"output": "output", "index": [3, 17], "flat_index": 3089, "got": "0.5", "expected": "-4.03",
                     "max_abs_error": 4.53, "allowed": "atol=0.1, rtol=0.02", "wrong": 12, "elements": 1048576},
    }  # fmt: skip
    worker.finish(ev, doc)
    base = live_server.url
    visit(page, f"{base}/submissions/{sub.pk}/")
    assert page.locator("[data-failure]").count() == 0  # not the owner: the status only
    assert "Wrong answer" in page.locator(".evaluation-state").inner_text()

    log_in(page, base, "alice")
    visit(page, f"{base}/submissions/{sub.pk}/")
    failure = page.locator("[data-failure]")
    assert failure.locator("[data-rank]").inner_text() == "1 of 2 (numbered from 0)"
    assert failure.locator("[data-shape]").inner_text() == "default"
    first = failure.locator("[data-first-failure]")
    assert first.inner_text() == "trial 2 of 2: first failure"
    # Highlighted: the failed trial stands out from those around it, and so does the failing shape's row.
    colours = page.evaluate(
        "[...document.querySelectorAll('.steps li')].map(li => getComputedStyle(li).backgroundColor)"
    )
    assert len(set(colours)) == 3 and colours[1] not in (colours[0], colours[2])
    row = page.locator("tr[data-failing-shape] td").first
    assert row.evaluate("td => getComputedStyle(td).backgroundColor") != "rgba(0, 0, 0, 0)"
    assert "failed here" in row.inner_text()
    assert "[3, 17]" in failure.locator("table.mismatch").inner_text()
    log = failure.locator("details.log pre")
    assert log.is_visible() and log.inner_text().splitlines()[1:] == ["warning: first line", "second line of the log"]
    shot(page, "failure-details")
    assert page.problems == []
