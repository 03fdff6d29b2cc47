"""The main flows in headless Chromium (Debian's package): sign up, submit, watch the status change
without reloading, find the result on the leaderboard, re-evaluate from the admin; and every main
page renders without console errors. Screenshots go to test-artifacts/screenshots/."""

import shutil
from pathlib import Path

import pytest
from django.db import connections

CHROMIUM = shutil.which("chromium")
SHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"
PASSWORD = "a long passphrase 42"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium package is not installed"),
    pytest.mark.django_db(transaction=True),
]


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
        page.console_errors = []
        page.on("console", lambda m: m.type == "error" and page.console_errors.append(f"{page.url}: {m.text}"))
        page.on("pageerror", lambda e: page.console_errors.append(f"{page.url}: {e}"))
        yield page
        browser.close()
        # Playwright's greenlet gives this code its own context, hence its own database connection.
        connections.close_all()
    connections.close_all()


def shot(page, name):
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def test_sign_up_submit_watch_rank_and_reevaluate(
    live_server, page, problem, other_problem, cpu, h200, worker, make_result, django_user_model, good_code
):
    from submissions.models import Evaluation, Submission

    url = live_server.url
    page.goto(f"{url}/accounts/signup/")
    page.fill("#id_username", "carol")
    page.fill("#id_password1", PASSWORD)
    page.fill("#id_password2", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{url}/")
    assert page.locator("header .user").inner_text().startswith("My submissions")

    page.goto(f"{url}/submit/?problem=allreduce")
    page.fill("#id_model_tag", "gpt-5.5")
    page.select_option("#id_backend", "pytorch")
    page.check("input[name=hardware][value=cpu]")
    page.uncheck("input[name=hardware][value=h200x4]")
    page.fill("#id_code", good_code)
    shot(page, "submit")
    page.click("form.stacked button[type=submit]")
    page.wait_for_url(f"{url}/submissions/*/")
    sub = Submission.objects.get(owner__username="carol")
    ev = sub.evaluations.get()
    assert page.locator(".evaluation-state").inner_text().startswith("Waiting in the queue: position 1")

    page.evaluate("window.notReloaded = true")  # gone if the page reloads
    for stage in ("building", "checking", "timing"):
        worker.stage(ev, "starting" if stage == "building" else stage)
        if stage == "building":
            worker.stage(ev, "building")
        page.locator(f'.evaluation-state[data-stage="{stage}"]').wait_for()
        assert page.locator(".progress li.current").inner_text() == stage
    shot(page, "submission-running")
    worker.finish(ev, make_result(ev, speedups=(1.5, 2.0, 3.0)))
    page.locator('.evaluation-state[data-state="done"]').wait_for()
    assert page.evaluate("window.notReloaded") is True
    assert "Correct" in page.locator(".evaluation-state").inner_text()
    page.locator("canvas[data-drawn]").first.wait_for()  # the charts were drawn after the swap
    assert page.locator("#live[hx-trigger]").count() == 0  # polling stopped
    shot(page, "submission-done")

    page.goto(f"{url}/problems/allreduce/leaderboard/cpu/")
    row = page.locator("table tbody tr").first
    assert "carol" in row.inner_text() and "2.08×" in row.inner_text()  # geometric mean of 1.5, 2, 3
    shot(page, "leaderboard")

    django_user_model.objects.create_superuser("root", "root@example.org", PASSWORD)
    page.click("text=Log out")
    page.goto(f"{url}/accounts/login/?next=/admin/submissions/submission/")
    page.fill("#id_username", "root")
    page.fill("#id_password", PASSWORD)
    page.click("form.stacked button[type=submit]")
    page.wait_for_url("**/admin/submissions/submission/")
    page.check(f"input[name=_selected_action][value='{sub.pk}']")
    page.select_option("select[name=action]", "reevaluate")
    page.click("button[name=index]")
    page.select_option("select[name=hardware]", label="h200x4")
    shot(page, "admin-reevaluate")
    page.click("input[name=apply]")
    page.locator("text=Queued 1 evaluations on h200x4.").wait_for()
    rerun = Evaluation.objects.get(submission=sub, hardware=h200)
    assert (rerun.state, rerun.world_size, rerun.requested_by.username) == ("queued", 4, "root")
    assert page.console_errors == []


def test_main_pages_have_no_console_errors(
    live_server, page, problem, cpu, h200, judged, submit, user, worker, make_result
):
    from casestudies.models import CaseStudy

    done = judged(user, problem, cpu, speedups=(1.5, 2.0, 3.0), model_tag="gpt-5.5")
    judged(user, problem, cpu, status="incorrect", model_tag="glm")
    both = submit(user, problem, [cpu, h200], model_tag="paired")
    for ev in both.evaluations.all():
        worker.finish(ev, make_result(ev))
    study = CaseStudy.objects.create(
        title="All-reduce without NCCL",
        slug="allreduce",
        published=True,
        body="## Result\n\nA one-shot kernel reaches **2x** at 1024x1024.",
    )
    study.evaluations.add(done)
    pages = {
        "catalog": "/",
        "problem": "/problems/allreduce/",
        "submission": f"/submissions/{done.submission_id}/",
        "leaderboard-cpu": "/problems/allreduce/leaderboard/cpu/",
        "models": "/compare/models/?hardware=cpu&hardware_b=h200x4",
        "hardware": "/compare/hardware/?a=cpu&b=h200x4",
        "case-studies": "/case-studies/",
        "case-study": "/case-studies/allreduce/",
        "api-docs": "/api/docs",
        "login": "/accounts/login/",
        "signup": "/accounts/signup/",
    }
    for name, path in pages.items():
        response = page.goto(live_server.url + path)
        assert response.status == 200, path
        shot(page, name)
    assert page.console_errors == []
    page.goto(live_server.url + "/compare/models/?hardware=cpu&hardware_b=h200x4")
    assert page.locator("canvas[data-drawn]").count() == 5  # roof_u does not apply on the cpu
