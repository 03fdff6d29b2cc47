"""Property-based requests generated from the OpenAPI schema: no input makes the API fail with a
server error, and answers match the documented schemas."""

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from accounts.models import ApiToken
from pkb_site.wsgi import application

schema = schemathesis.openapi.from_wsgi("/api/openapi.json", application)


@pytest.fixture
def auth_headers(db, judged, user, problem, other_problem, cpu, h200, settings):
    settings.PKB_SUBMISSIONS_PER_HOUR = 10_000
    judged(user, problem, cpu)  # results for the read endpoints to find
    # The WSGI handler closes aged connections after each request; the test's transaction lives on
    # that connection (Django's test client unhooks this the same way).
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield {"Authorization": "Bearer " + ApiToken.objects.issue(user)[1]}
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.mark.slow
@schema.parametrize()
@settings(
    max_examples=15,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.filter_too_much],
)
def test_no_server_errors(case, auth_headers):
    case.call_and_validate(headers=auth_headers, checks=[not_a_server_error, response_schema_conformance])
