"""A newcomer's first hour on a fresh install, in the browser (Debian's chromium): the catalog offers
an example that runs without a GPU; signed up, they load it into the submit form and submit it;
while no evaluation worker runs, the page says so instead of spinning; once one starts, the example
is judged correct and is on the problem's leaderboard. The real stack: the web server, the web-side
worker, an evaluation worker in cpu mode, the embedded filesystem broker, PostgreSQL."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import requests
from pkb_stack import free_port, wait_for

CHROMIUM = shutil.which("chromium")
SHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"
PASSWORD = "a long passphrase 42"

pytestmark = [
    pytest.mark.services,
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.timeout(240),
    pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium package is not installed"),
]


def _up(url: str) -> bool:
    try:
        return requests.get(url, timeout=2).status_code == 200
    except requests.RequestException:
        return False


def test_a_newcomer_submits_the_cpu_example_and_finds_it_on_the_leaderboard(make_stack):
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import sync_playwright

    stack = make_stack("filesystem://")  # a fresh install: migrated, problems synced, the cpu hardware
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    stack.web_server(port)
    web = stack.web_worker()
    wait_for(lambda: _up(base + "/"), 60, "the web server")
    stack.wait_ready(web)
    SHOTS.mkdir(parents=True, exist_ok=True)

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"], headless=True)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.set_default_timeout(15_000)
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))

        page.goto(base + "/accounts/signup/")
        page.fill("#id_username", "newcomer")
        page.fill("#id_password1", PASSWORD)
        page.fill("#id_password2", PASSWORD)
        page.click("form.stacked button[type=submit]")
        page.wait_for_url(base + "/")

        # The first page offers an example that runs here without a GPU; it fills in the form.
        assert "runs on cpu" in page.locator(".first-example").inner_text()
        page.click(".first-example >> text=Try an example")
        page.wait_for_url("**/submit/?example=allreduce_ring")
        assert page.input_value("#id_model_tag") == "example"
        assert "dist.isend" in page.input_value("#id_code")
        assert page.is_checked("input[name=hardware][value=cpu]")
        page.screenshot(path=str(SHOTS / "first-hour-submit.png"), full_page=True)
        page.click("form.stacked button[type=submit]")
        page.wait_for_url("**/submissions/*/")

        # No evaluation worker yet: the page says so, instead of a spinner that never ends.
        assert "No worker is serving this hardware" in page.locator("#live").inner_text()
        page.screenshot(path=str(SHOTS / "first-hour-no-worker.png"), full_page=True)

        stack.gpu_worker("cpu", "first-hour")
        try:
            page.locator('.evaluation-state[data-state="done"]').wait_for(timeout=150_000)
        except PlaywrightTimeout:
            # Seen once in a full suite run (and never alone): keep what the page and the processes said.
            page.screenshot(path=str(SHOTS / "first-hour-not-done.png"), full_page=True)
            pytest.fail("the evaluation was not done within 150 s; the page says:\n"
                        f"{page.locator('#live').inner_text()}\n{stack.tail_logs()}")
        state = page.locator(".evaluation-state").inner_text()
        assert "Correct" in state, state + "\n" + stack.tail_logs()
        page.screenshot(path=str(SHOTS / "first-hour-correct.png"), full_page=True)

        # The worker announced itself to the web side (and is still serving the queue).
        serving = {hw["slug"]: hw["workers"] for hw in requests.get(base + "/api/hardware", timeout=10).json()}
        assert serving["cpu"] == [f"first-hour@{stack.tag}"]

        page.goto(base + "/problems/allreduce/leaderboard/cpu/")
        row = page.locator("table tbody tr").first.inner_text()
        assert "newcomer" in row and "example" in row
        assert errors == []
        browser.close()
