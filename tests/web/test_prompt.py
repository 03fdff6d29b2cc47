import pytest

pytestmark = pytest.mark.django_db


def test_prompt_download_has_reference_topology_and_rules(client, problem, h200):
    response = client.get("/problems/allreduce/prompt/?hardware=h200x4")
    assert response.status_code == 200
    assert response["Content-Disposition"] == 'attachment; filename="allreduce_h200x4_prompt.md"'
    text = response.content.decode()
    assert problem.reference_source.strip() in text
    assert "4x NVIDIA H200 SXM" in text and "450 GB/s" in text
    assert "NVLink multicast (NVLS): NOT available" in text and "do not use `multimem`" in text
    assert "World size: 4 ranks" in text
    assert "atol=0.1, rtol=0.02" in text
    assert "load_inline" in text and "Triton" in text and "no caching" in text
    assert "symm_mem.rendezvous" in text  # the worked example


def test_prompt_for_hardware_with_multicast_does_not_forbid_it(client, problem, h200):
    h200.profile = "h100"  # NVLS available in evaluator/hardware.toml
    h200.save()
    text = client.get("/problems/allreduce/prompt/?hardware=h200x4").content.decode()
    assert "multimem" not in text and "NVLink multicast (NVLS): available" in text


def test_prompt_needs_a_known_hardware(client, problem):
    assert client.get("/problems/allreduce/prompt/").status_code == 404
    assert client.get("/problems/allreduce/prompt/?hardware=nope").status_code == 404
