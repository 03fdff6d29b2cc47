"""Page latency of the web platform under a realistic load of results.

    python bench/web_pages.py [--database-url postgres://postgres@127.0.0.1:5432/pkb_bench] [--requests 50]

Creates (drops first) the given PostgreSQL database, seeds it with 100,000 evaluations (50 problems,
20 model tags, 50 samples per model and problem, each evaluated on two hardware) through
bulk_create, starts gunicorn with 2 sync workers on a loopback port, and times the catalog, one
problem leaderboard, the model comparison (two hardware side by side) and, for reference, the problem
page and the hardware comparison, from an HTTP client: median and 90th percentile of N sequential
requests after a warm-up, then "cold" requests, each right after the results version moved on (as
when a result is stored), so cached aggregates are recomputed. Query counts come from the same views
run in-process, uncached.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "platform"), str(ROOT)]

PROBLEMS, MODELS, SAMPLES = 50, 20, 50  # x 2 hardware = 100,000 evaluations


def setup_django(database_url: str) -> None:
    os.environ["PKB_DATABASE_URL"] = database_url  # before the settings module is first imported
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pkb_site.settings")
    import django

    django.setup()


def recreate_database(database_url: str) -> None:
    import psycopg

    from pkb_site.settings import database_from_url

    db = database_from_url(database_url)
    admin = psycopg.connect(
        host=db["HOST"],
        port=db["PORT"] or 5432,
        user=db["USER"],
        password=db["PASSWORD"],
        dbname="postgres",
        autocommit=True,
    )
    admin.execute(f'DROP DATABASE IF EXISTS "{db["NAME"]}"')
    admin.execute(f'CREATE DATABASE "{db["NAME"]}"')
    admin.close()


def seed(rng: random.Random) -> dict:
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection
    from django.utils import timezone

    from catalog.models import Hardware, Problem
    from catalog.sync import hardware_from_profile, sync_problems
    from evaluator.results import SCHEMA, FailureKind, Status
    from submissions.models import Evaluation, Submission

    call_command("migrate", verbosity=0)
    sync_problems()
    problems = list(Problem.objects.filter(active=True)[:PROBLEMS])
    shapes = [
        {"name": n, "dims": {"M": m, "N": 1024}, "default": n == "default"}
        for n, m in (("small", 64), ("default", 1024), ("large", 8192))
    ]
    for i in range(len(problems), PROBLEMS):  # top up with synthetic problems if the suite is smaller
        problems.append(
            Problem.objects.create(
                slug=f"synthetic-{i}",
                pkb_id=1000 + i,
                title=f"Synthetic {i}",
                level=1 + i % 6,
                parallelism="TP",
                shapes=shapes,
                world_sizes=[2, 4, 8],
            )
        )
    Problem.objects.exclude(pk__in=[p.pk for p in problems]).update(active=False)
    cpu = Hardware.objects.get(slug="cpu")
    h200 = hardware_from_profile("h200x4", "h200", 4)
    h200.save()
    User = get_user_model()
    owners = User.objects.bulk_create([User(username=f"user{i}") for i in range(40)])
    models = [f"model-{i:02d}" for i in range(MODELS)]
    failures = [kind for kind in FailureKind if kind is not FailureKind.REJECTED]  # admins' business
    skill = {m: 0.15 + 0.6 * i / MODELS for i, m in enumerate(models)}  # probability of a correct sample
    start = timezone.now() - timedelta(days=30)
    subs = []
    for p in problems:
        for m in models:
            owner = owners[hash(m) % len(owners)]
            for s in range(SAMPLES):
                code = f"# {p.slug} {m} {s}\ndef solution(*inputs):\n    return inputs\n"
                subs.append(
                    Submission(
                        problem=p,
                        owner=owner,
                        model_tag=m,
                        sample_index=s,
                        backend="cuda",
                        code=code,
                        sha256=hashlib.sha256(code.encode()).hexdigest(),
                        created_at=start + timedelta(seconds=len(subs)),
                    )
                )
    subs = Submission.objects.bulk_create(subs, batch_size=5000)
    evaluations = []
    for sub in subs:
        for hw in (cpu, h200):
            correct = rng.random() < skill[sub.model_tag]
            status = Status.CORRECT if correct else rng.choice(failures)
            speedup = rng.lognormvariate(-0.1, 0.6) if correct else None
            utilization = min(1.0, rng.betavariate(2, 5)) if correct else None
            doc = {
                "schema": SCHEMA,
                "status": status.value,
                "reason": "" if correct else f"{status} on rank 0",
                "problem": sub.problem.slug,
                "mode": hw.mode,
                "world_size": 2 if hw is cpu else 4,
                "shapes": [],
                "summary": {
                    "correct": correct,
                    "speedup": speedup,
                    "utilization": utilization,
                    "solution_us": 100 / speedup if speedup else None,
                    "reference_us": 100.0,
                },
            }
            finished = sub.created_at + timedelta(minutes=5)
            evaluations.append(
                Evaluation(
                    submission=sub,
                    hardware=hw,
                    problem_id=sub.problem_id,
                    model_tag=sub.model_tag,
                    world_size=doc["world_size"],
                    mode=hw.mode,
                    state="done",
                    stage="done",
                    status=status.value,
                    result=doc,
                    correct=correct,
                    speedup=speedup,
                    utilization=utilization,
                    solution_us=doc["summary"]["solution_us"],
                    reference_us=100.0,
                    attempts=1,
                    output_digest=hashlib.sha256(f"{sub.pk}".encode()).hexdigest() if correct else None,
                    queued_at=sub.created_at,
                    started_at=sub.created_at,
                    finished_at=finished,
                )
            )
    # A bulk load with no reruns: the superseded trigger (migration 0003) has nothing to mark, and its
    # per-row lookups would be planned against an empty table; switch it off for the load.
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE submissions_evaluation DISABLE TRIGGER USER")
        Evaluation.objects.bulk_create(evaluations, batch_size=5000)
        cursor.execute("ALTER TABLE submissions_evaluation ENABLE TRIGGER USER")
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")  # what autovacuum does to a table this size in production
    return {
        "problems": len(problems),
        "models": len(models),
        "submissions": len(subs),
        "evaluations": Evaluation.objects.count(),
        "leaderboard_problem": problems[0].slug,
    }


def query_counts(pages: dict[str, str]) -> dict[str, int]:
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    client = Client()
    counts = {}
    for name, path in pages.items():
        with CaptureQueriesContext(connection) as ctx:
            assert client.get(path).status_code == 200, path
        counts[name] = len(ctx.captured_queries)
    return counts


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(database_url: str, port: int) -> subprocess.Popen:
    env = {
        **os.environ,
        "PKB_DATABASE_URL": database_url,
        "PKB_DEBUG": "0",
        "PKB_SECRET_KEY": "b" * 50,
        "PKB_ALLOWED_HOSTS": "127.0.0.1",
        "PYTHONPATH": f"{ROOT / 'platform'}:{ROOT}",
        "PKB_LOG_LEVEL": "WARNING",
    }
    subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "collectstatic", "--noinput", "-v", "0"], env=env, check=True
    )
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "pkb_site.wsgi:application",
            "--workers",
            "2",
            "--bind",
            f"127.0.0.1:{port}",
            "--log-level",
            "warning",
        ],
        env=env,
        cwd=ROOT,
    )
    for _ in range(300):
        try:
            requests.get(f"http://127.0.0.1:{port}/accounts/login/", timeout=30)
            return server
        except requests.RequestException:
            time.sleep(0.2)
    server.kill()
    raise RuntimeError("gunicorn did not start")


def invalidate() -> None:
    """What a newly stored result does: raise the results version, so cached aggregates are recomputed."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("UPDATE submissions_resultsversion SET version = version + 1")


def time_pages(port: int, pages: dict[str, str], n: int, cold_n: int, warmup: int = 5) -> dict[str, dict]:
    """Warm: N requests in a row (cached aggregates reused, as between two results). Cold: before
    each request the results version moves on, as when a result has just been stored."""
    session = requests.Session()
    out = {}
    for name, path in pages.items():
        url = f"http://127.0.0.1:{port}{path}"
        out[name] = {}

        def get(url=url, record=out[name]) -> float:
            t0 = time.perf_counter()
            response = session.get(url, timeout=60)
            assert response.status_code == 200, url
            record["bytes"] = len(response.content)
            return (time.perf_counter() - t0) * 1000

        for _ in range(warmup):
            get()
        warm = sorted(get() for _ in range(n))
        cold = []
        for _ in range(cold_n):
            invalidate()
            cold.append(get())
        cold.sort()
        out[name].update(
            median_ms=statistics.median(warm),
            p90_ms=warm[int(0.9 * (n - 1))],
            cold_median_ms=statistics.median(cold),
            cold_max_ms=cold[-1],
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/pkb_bench")
    parser.add_argument("--requests", type=int, default=50)
    parser.add_argument("--cold-requests", type=int, default=10)
    parser.add_argument("--keep", action="store_true", help="reuse an already seeded database")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    setup_django(args.database_url)
    if not args.keep:
        recreate_database(args.database_url)
    t0 = time.perf_counter()
    if args.keep:
        from catalog.models import Problem
        from submissions.models import Evaluation

        facts = {
            "evaluations": Evaluation.objects.count(),
            "leaderboard_problem": Problem.objects.filter(active=True).first().slug,
        }
    else:
        facts = seed(random.Random(7))
    facts["seed_s"] = round(time.perf_counter() - t0, 1)
    slug = facts["leaderboard_problem"]
    pages = {
        "catalog": "/",
        "leaderboard": f"/problems/{slug}/leaderboard/h200x4/",
        "model comparison": "/compare/models/?hardware=h200x4&hardware_b=cpu",
        "problem page": f"/problems/{slug}/",
        "hardware comparison": "/compare/hardware/?a=cpu&b=h200x4",
    }
    counts = query_counts(pages)
    port = free_port()
    server = serve(args.database_url, port)
    try:  # the server goes down whatever happens
        timings = time_pages(port, pages, args.requests, args.cold_requests)
    finally:
        server.terminate()
        server.wait(timeout=30)
    print(f"seeded: {json.dumps(facts)}")
    print(f"{'page':22} {'median ms':>10} {'p90 ms':>8} {'cold median':>12} {'cold max':>9} {'queries':>8} {'KiB':>6}")
    for name in pages:
        t = timings[name]
        print(
            f"{name:22} {t['median_ms']:10.1f} {t['p90_ms']:8.1f} {t['cold_median_ms']:12.1f} {t['cold_max_ms']:9.1f} "
            f"{counts[name]:8d} {t['bytes'] / 1024:6.0f}"
        )
    if args.json:
        args.json.write_text(json.dumps({"facts": facts, "timings": timings, "queries": counts}, indent=2))


if __name__ == "__main__":
    main()
