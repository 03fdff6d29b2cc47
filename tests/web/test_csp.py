"""A Content-Security-Policy on every page: scripts and styles from the site's own files only (no
inline script or style, no eval). test_browser_safety.py checks in Chromium that the pages, htmx
and the charts work under it."""

import re

import pytest

pytestmark = pytest.mark.django_db

TEMPLATES = __import__("pathlib").Path(__file__).resolve().parents[2] / "templates"


def test_every_page_sends_the_policy(client, judged, user, problem, cpu):
    ev = judged(user, problem, cpu)
    paths = ["/", "/problems/allreduce/", f"/submissions/{ev.submission_id}/", "/compare/models/", "/nowhere/"]
    paths += ["/api/problems", "/accounts/login/", "/static/pkb/site.css"]
    for path in paths:
        policy = client.get(path)["Content-Security-Policy"]
        assert "script-src 'self'" in policy and "object-src 'none'" in policy and "frame-ancestors 'none'" in policy
        assert "unsafe-eval" not in policy
    policy = client.get("/")["Content-Security-Policy"]
    assert "style-src 'self';" in policy and "unsafe-inline" not in policy


def test_templates_carry_no_inline_script_or_style():
    """What the policy forbids, the templates must not need: JSON data blocks are the only scripts
    without a src, and no element has a style or on* attribute."""
    for path in TEMPLATES.rglob("*.html"):
        if path.name == "500.html":  # served without the site around it; it has none either
            continue
        text = path.read_text()
        for tag in re.findall(r"<script\b[^>]*>", text):
            assert "src=" in tag or "application/json" in tag, (path, tag)
        assert not re.search(r"<style\b|\sstyle=|\son[a-z]+=", text), path
    assert "json_script" in (TEMPLATES / "submissions" / "_live.html").read_text()  # how data reaches charts.js
