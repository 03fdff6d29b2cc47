import pytest

from casestudies.models import CaseStudy

pytestmark = pytest.mark.django_db


def test_markdown_is_rendered_and_sanitized(client, admin_user):
    body = (
        "# Ring attention\n\nA **fast** kernel. <script>alert(1)</script>\n\n"
        "[click](javascript:alert(2)) <img src=x onerror=alert(3)>\n\n```python\nx = 1\n```\n"
    )
    CaseStudy.objects.create(title="Ring", slug="ring", body=body, author=admin_user, published=True)
    html = client.get("/case-studies/ring/").content.decode()
    article = html.split("<article>")[1].split("</article>")[0]
    assert "<strong>fast</strong>" in article and 'class="highlight"' in article
    assert "<script" not in article and "javascript:" not in article and "onerror" not in article


def test_drafts_are_for_staff_only(client, admin_user):
    CaseStudy.objects.create(title="Draft", slug="draft", body="soon", published=False)
    assert client.get("/case-studies/draft/").status_code == 404
    assert "Draft" not in client.get("/case-studies/").content.decode()
    client.force_login(admin_user)
    assert client.get("/case-studies/draft/").status_code == 200


def test_plots_come_from_linked_evaluations(client, judged, user, problem, cpu):
    ev = judged(user, problem, cpu, speedups=(1.2, 2.4, 3.6))
    hidden = judged(user, problem, cpu, speedups=(5, 5, 5), model_tag="hidden")
    hidden.hidden = True
    hidden.save()
    study = CaseStudy.objects.create(title="Allreduce", slug="allreduce", body="text", published=True)
    study.evaluations.add(ev, hidden)
    response = client.get("/case-studies/allreduce/")
    chart = response.context["chart"]
    assert chart["data"]["labels"] == ["small", "default", "large"]
    [dataset] = chart["data"]["datasets"]
    assert dataset["data"] == [1.2, 2.4, 3.6]
    assert 'id="study-chart"' in response.content.decode()
