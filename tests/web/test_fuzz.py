"""No input reaches a 500. Every URL pattern (walked from the resolver, so a new page is covered the
day it is added) and every API operation (read from the OpenAPI schema) gets hostile path
parameters, query strings, bodies and methods, as an anonymous visitor, a user and an admin.

Each route gets a fixed sample of the hostile cases (seeded by its route, so a failure repeats);
together the routes cover all of them. A failure names the request to replay."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, resolve
from django.urls.exceptions import Resolver404

from accounts.models import ApiToken

pytestmark = pytest.mark.django_db

PLATFORM = Path(__file__).resolve().parents[2] / "platform"

# Raw query-string values, sent as they are (already percent-encoded where needed).
HOSTILE_VALUES = [
    "%C2%B2",  # superscript two: str.isdigit() says yes, int() says no
    "%D9%A1",  # Arabic-Indic digit one
    "%EF%BC%91",  # fullwidth digit one
    "%00",
    "a%00b",
    "%FF%FE",  # not UTF-8
    "%ED%A0%80",  # a lone surrogate, encoded
    "-1",
    "0",
    "99999999999999999999999999999",
    "1e309",
    "NaN",
    "",
    "%20",
    "A" * 5000,
    "9" * 5000,
    "%3Cscript%3Ealert(1)%3C%2Fscript%3E",
    "%27%22%3B--",
    "..%2F..%2Fetc%2Fpasswd",
    "%E2%80%AEexe.txt",  # right-to-left override
    "%5B%5D",
    "%7B%7D",
    "true",
    "__proto__",
]

# Path parameters: whatever of these the route's pattern accepts (checked by resolving the path).
HOSTILE_SEGMENTS = [
    "0",
    "-1",
    "1",
    "9223372036854775807",
    "9223372036854775808",
    "99999999999999999999999999999",
    "%C2%B2",
    "%00",
    "%FF",
    "a" * 300,
    "--",
    "_",
    "%2E%2E",
    "%E2%80%AE",
    "%3Cb%3E",
    "x.y",
]

# Bodies for POST/PUT/PATCH/DELETE, with their content types.
HOSTILE_BODIES = [
    ("application/json", b"{"),
    ("application/json", b"null"),
    ("application/json", b"[]"),
    ("application/json", b'"\\u0000"'),
    ("application/json", b"[" * 100_000 + b"]" * 100_000),  # deeper than json's recursion limit
    ("application/json", b'{"a": ' + b"9" * 5000 + b"}"),
    ("application/json", b"\xff\xfe\x00"),
    ("application/json", b"x" * (2_621_440 + 1)),  # one byte over DATA_UPLOAD_MAX_MEMORY_SIZE
    ("application/x-www-form-urlencoded", b"a=%00&b=%C2%B2&level=%C2%B2"),
    ("application/x-www-form-urlencoded", b"&".join(b"f%d=1" % i for i in range(1200))),  # too many fields
    ("application/x-www-form-urlencoded", b"code=" + b"x" * (2_621_440 + 1)),
    ("multipart/form-data; boundary=zzz", b'--zzz\r\nContent-Disposition: form-data; name="a"\r\n\r\n'),
    ("multipart/form-data", b"no boundary"),
    ("text/plain", b"\x00" * 64),
]

# Hostile values for the fields of the API's JSON request bodies.
HOSTILE_JSON_VALUES = [None, "", "\x00", "²", "\u202e", "A" * 5000, -1, 10**30, 1e308, [], {}, True, ["\x00"] * 20]
HOSTILE_JSON_VALUES.append("def solution(x):\n    return x\ny = " + "+".join(["1"] * 50_000))  # too deep to parse

METHODS = ["get", "post", "put", "patch", "delete", "options", "head"]

# Query parameters the pages read, found in the views' source, plus the admin's own.
ADMIN_PARAMS = ["q", "o", "p", "e", "all", "_changelist_filters", "_popup", "_to_field", "next"]


def page_params() -> list[str]:
    found = set(ADMIN_PARAMS)
    for path in PLATFORM.rglob("*.py"):
        found.update(re.findall(r"""request\.GET(?:\.get|\.getlist)?[\(\[]["'](\w+)["']""", path.read_text()))
    return sorted(found)


def walk(patterns, prefix: str = ""):
    """(route as the resolver reports it, the pattern) for every URL pattern."""
    for p in patterns:
        if isinstance(p, URLResolver):
            yield from walk(p.url_patterns, prefix + str(p.pattern))
        elif isinstance(p, URLPattern):
            yield prefix + str(p.pattern), p


PARAM = re.compile(r"<(?:\w+:)?(\w+)>|\(\?P<(\w+)>(?:[^()]|\([^()]*\))*\)")


def template_of(route: str) -> str:
    """The route with each parameter as {name}, regex syntax stripped."""
    t = PARAM.sub(lambda m: "{" + (m.group(1) or m.group(2)) + "}", route)
    return "/" + t.replace("^", "").replace("$", "").replace("\\", "")


def resolves_to(path: str, route: str) -> bool:
    try:
        return resolve(path.split("?")[0]).route == route
    except Resolver404:
        return False


def fill(template: str, values: dict[str, str]) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: values.get(m.group(1), "1"), template)


@pytest.fixture
def world(judged, user, other_user, admin_user, problem, other_problem, cpu, h200, settings):
    from casestudies.models import CaseStudy

    settings.PKB_SUBMISSIONS_PER_HOUR = 10_000
    # Hostile requests by the thousand: the rate limits (test_throttling.py) would answer most of them.
    settings.PKB_API_BAD_TOKENS_PER_HOUR = settings.PKB_API_REQUESTS_PER_MINUTE = 1_000_000
    settings.PKB_SIGNUPS_PER_HOUR = settings.AXES_FAILURE_LIMIT = 1_000_000
    correct = judged(user, problem, cpu)
    failed = judged(user, problem, cpu, status="incorrect", model_tag="glm")
    study = CaseStudy.objects.create(title="Study", slug=problem.slug, body="# Hi", published=True)
    study.evaluations.add(correct)
    token = ApiToken.objects.issue(user, "fuzz")[0]
    return {
        "slug": problem.slug,
        "hardware": cpu.slug,
        "pk": str(correct.submission_id),
        "submission_id": str(correct.submission_id),
        "evaluation_id": str(failed.pk),
        "object_id": str(correct.submission_id),
        "problem": problem.slug,
        "app_label": "submissions",
        "content_type_id": "1",
        "token_pk": str(token.pk),
        "url": "nothing-here",
    }


def clients(user, admin_user):
    anonymous = Client(raise_request_exception=False)
    member = Client(raise_request_exception=False)
    member.force_login(user)
    staff = Client(raise_request_exception=False)
    staff.force_login(admin_user)
    return {"anonymous": anonymous, "user": member, "admin": staff}


def send(client: Client, method: str, path: str, body=None, headers=None):
    kwargs = {"headers": headers or {}}
    if body is not None:
        kwargs.update(content_type=body[0], data=body[1])
    return getattr(client, method)(path, **kwargs)


def check(failures: list, who: str, method: str, path: str, response, body=None) -> None:
    if response.status_code >= 500:
        what = f" body {body[0]} {body[1][:60]!r}" if body else ""
        failures.append(f"{who} {method.upper()} {path[:200]}{what} -> {response.status_code}")


def test_no_page_answers_a_hostile_request_with_a_server_error(world, user, admin_user):
    who = clients(user, admin_user)
    params = page_params()
    failures: list[str] = []
    routes = list(walk(get_resolver().url_patterns))
    assert len(routes) > 20, "the resolver walk found too few patterns"
    for route, _pattern in routes:
        rng = random.Random(route)
        template = template_of(route)
        names = re.findall(r"\{(\w+)\}", template)
        # The admin's pages answer only staff and are Django's own: a smaller sample each.
        admin_route = route.startswith("admin/")
        users = ["admin"] if admin_route else list(who)
        valid = fill(template, world)
        paths = [valid] if resolves_to(valid, route) else []
        for name in names:  # each parameter hostile in turn, the others valid
            for segment in rng.sample(HOSTILE_SEGMENTS, 2 if admin_route else len(HOSTILE_SEGMENTS)):
                path = fill(template, {**world, name: segment})
                if resolves_to(path, route):
                    paths.append(path)
        if not paths:
            continue
        values = rng.sample(HOSTILE_VALUES, 2 if admin_route else 12)
        queries = ["&".join(f"{p}={v}" for p in params) for v in values]
        queries.append("&".join(f"{p}=1&{p}=%C2%B2" for p in params))  # repeated parameters
        requests = [("get", path, None) for path in paths]
        requests += [("get", f"{paths[0]}?{q}", None) for q in queries]
        for method in rng.sample(METHODS[1:], 2 if admin_route else len(METHODS) - 1):
            for body in rng.sample(HOSTILE_BODIES, 1 if admin_route else 2):
                requests.append((method, paths[0], body if method not in ("options", "head") else None))
        for method, path, body in requests:
            name = rng.choice(users)
            check(failures, name, method, path, send(who[name], method, path, body), body)
    assert not failures, "\n".join(failures)


def operations():
    """(method, path template, operation) for every operation of the API's schema."""
    from api.api import api

    schema = api.get_openapi_schema()
    for path, item in schema["paths"].items():
        for method, op in item.items():
            yield method, path, op, schema


def body_fields(op: dict, schema: dict) -> dict:
    ref = (((op.get("requestBody") or {}).get("content") or {}).get("application/json") or {}).get("schema") or {}
    if "$ref" in ref:
        ref = schema["components"]["schemas"][ref["$ref"].split("/")[-1]]
    return ref.get("properties") or {}


def test_no_api_operation_answers_a_hostile_request_with_a_server_error(world, user, admin_user, good_code):
    who = clients(user, admin_user)
    token = ApiToken.objects.issue(user, "fuzz-api")[1]
    headers = [
        {},
        {"Authorization": f"Bearer {token}"},
        {"Authorization": "Bearer pkb_" + "A" * 5000},
        {"Authorization": "Bearer \u202e"},
        {"Authorization": "Basic Og=="},
    ]
    failures: list[str] = []
    ops = list(operations())
    assert len(ops) >= 8
    for method, path, op, schema in ops:
        rng = random.Random(method + path)
        template = path  # the schema's paths carry the /api prefix
        names = re.findall(r"\{(\w+)\}", template)
        query = [p["name"] for p in op.get("parameters", []) if p["in"] == "query"]
        requests = []
        valid = {n: world.get(n, world["slug"]) for n in names}
        for name in names:
            for segment in HOSTILE_SEGMENTS:
                requests.append((fill(template, {**valid, name: segment}), None))
        base = fill(template, valid)
        for value in HOSTILE_VALUES:
            q = "&".join(f"{p}={value}" for p in query) or f"x={value}"
            requests.append((f"{base}?{q}", None))
        requests.append((base + "?" + "&".join(f"{p}=a&{p}=%00" for p in query), None))
        if method in ("post", "put", "patch"):
            fields = body_fields(op, schema)
            sane = {"problem": world["slug"], "code": good_code, "hardware": [world["hardware"]]}
            for field in fields:
                for value in HOSTILE_JSON_VALUES:
                    requests.append((base, ("application/json", json.dumps({**sane, field: value}).encode())))
            requests.extend((base, body) for body in HOSTILE_BODIES)
        for path_q, body in requests:
            header = headers[1] if body is not None else rng.choice(headers)  # bodies get past the token check
            client = who[rng.choice(list(who))]
            response = send(client, method, path_q, body, header)
            check(failures, f"{header.get('Authorization', 'anonymous')[:20]}", method, path_q, response, body)
        for other in ("put", "patch", "delete", "options"):  # methods the operation does not have
            check(failures, "anonymous", other, base, send(who["anonymous"], other, base))
    assert not failures, "\n".join(failures)
