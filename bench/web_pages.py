"""Page latency of the web platform under a realistic load of results.

    python bench/web_pages.py [--database-url postgres://postgres@127.0.0.1:5432/pkb_bench] [--requests 50]

Creates (drops first) the given PostgreSQL database, seeds it with 100,000 evaluations (50 problems,
20 model tags, 50 samples per model and problem, each evaluated on two hardware) through
bulk_create, starts gunicorn with 2 sync workers on a loopback port, and times the catalog, one
problem leaderboard, the model comparison (two hardware side by side) and, for reference, the problem
page and the hardware comparison, from an HTTP client: median and 90th percentile of N sequential
requests after a warm-up, then "cold" requests, each right after a result was stored (a rerun of a
random submission on a random hardware, through the dispatch app's store_result, superseding the
older result), so what depends on it is recomputed. Query counts come from the same views run
in-process, uncached. Last, the write path: the time store_result takes for one rerun, with the
result-counting triggers (migration 0007) and, for comparison, without them.
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
import uuid
from datetime import timedelta
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "platform"), str(ROOT)]

PROBLEMS, MODELS, SAMPLES = 50, 20, 50  # x 2 hardware = 100,000 evaluations


def setup_django(database_url: str) -> None:
    os.environ["PKB_DATABASE_URL"] = database_url  # before the settings module is first imported
    os.environ.setdefault("PKB_LOG_LEVEL", "WARNING")  # not a line per stored result
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
    from leaderboards.comparisons import recount_results
    from submissions.models import Evaluation, ModelName, Submission

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
    owner_of = {m: owners[i % len(owners)] for i, m in enumerate(models)}
    # Registered to the accounts that submit under them: comparisons count only vouched runs.
    ModelName.objects.bulk_create([ModelName(name=m, owner=owner_of[m]) for m in models])
    failures = [kind for kind in FailureKind if kind is not FailureKind.REJECTED]  # admins' business
    skill = {m: 0.15 + 0.6 * i / MODELS for i, m in enumerate(models)}  # probability of a correct sample
    start = timezone.now() - timedelta(days=30)
    subs = []
    for p in problems:
        for m in models:
            owner = owner_of[m]
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
    # per-row lookups would be planned against an empty table; switch the triggers off for the load
    # and count the results once afterwards.
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE submissions_evaluation DISABLE TRIGGER USER")
        Evaluation.objects.bulk_create(evaluations, batch_size=5000)
        cursor.execute("ALTER TABLE submissions_evaluation ENABLE TRIGGER USER")
    recount_results()
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


def serve(database_url: str, port: int, cache_url: str = "") -> subprocess.Popen:
    env = {
        **os.environ,
        "PKB_DATABASE_URL": database_url,
        "PKB_CACHE_URL": cache_url,
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


def result_document(ev, rng: random.Random) -> dict:
    """A valid result document for a rerun of `ev` (its problem's default shape), correct or not."""
    from evaluator import results
    from evaluator.results import FailureKind, Mode, Result, ShapeResult, Status

    correct = rng.random() < 0.5
    status = Status.CORRECT if correct else rng.choice([k for k in FailureKind if k is not FailureKind.REJECTED])
    shape = next((s for s in ev.problem.shapes if s.get("default")), ev.problem.shapes[0])
    speedup = rng.lognormvariate(-0.1, 0.6)
    ref_us, sol_us = 100.0, 100.0 / speedup
    ranks = ev.world_size
    shapes = [
        ShapeResult(
            name=shape["name"],
            dims=shape["dims"],
            default=True,
            correct=correct if status in (Status.CORRECT, Status.INCORRECT) else None,
            max_abs_error=0.001 if correct else None,
            solution=results.timing([[sol_us] * 3] * ranks) if correct else None,
            reference=results.timing([[ref_us] * 3] * ranks),
            speedup=speedup if correct else None,
            speedup_interval=[speedup * 0.95, speedup * 1.05] if correct else None,
            roofline=results.Roofline(t_roof_us=sol_us * 0.3, bound=results.Resource.NVLINK, phases=[], utilization=0.3)
            if correct
            else None,
            digests=results.Digests(
                solution=[f"{rng.random():.6f}".ljust(64, "0")] * ranks, reference=["r" * 64] * ranks
            ),
            notes=[],
        )
    ]
    mode = Mode(ev.mode)
    return Result(
        status=status,
        reason="" if correct else f"{status} on rank 0",
        failing_rank=None if correct else 0,
        problem=ev.problem.slug,
        mode=mode,
        world_size=ranks,
        hardware=None,
        timings_meaningful=mode.timings_meaningful,
        settings=results.Settings(warmup=3, iters=3, trials=2, timeout_s=60.0),
        shapes=shapes,
        summary=results.summarize(shapes, status),
        stages={},
        environment={"sandboxed": True},
        log_tail="",
        started_at="",
        finished_at="",
    ).to_dict()


class Results:
    """Stores reruns of random submissions, as a GPU worker's result arrives: a queued evaluation
    (not timed) finished by the dispatch app's store_result (timed), which supersedes the older
    result and fires every trigger on the way."""

    def __init__(self, rng: random.Random):
        from submissions.models import Evaluation

        self.rng = rng
        self.ids = list(Evaluation.objects.filter(state="done", superseded=False).values_list("pk", flat=True))

    def store(self) -> float:
        """Store one result; its store_result's time in ms."""
        from dispatch.transitions import store_result
        from submissions.models import Evaluation

        old = Evaluation.objects.select_related("problem").get(pk=self.rng.choice(self.ids))
        token = uuid.uuid4()
        ev = Evaluation.objects.create(
            submission_id=old.submission_id, hardware_id=old.hardware_id, problem=old.problem,
            model_tag=old.model_tag, world_size=old.world_size, mode=old.mode, dispatch_token=token,
        )  # fmt: skip
        doc = result_document(ev, self.rng)
        t0 = time.perf_counter()
        assert store_result(ev.pk, token, doc)
        elapsed = (time.perf_counter() - t0) * 1000
        self.ids[self.ids.index(old.pk)] = ev.pk
        return elapsed


COUNTING_TRIGGERS = ("pkb_count_on_insert", "pkb_count_on_delete", "pkb_count_on_update")


def time_writes(results: Results, n: int) -> dict[str, dict]:
    """store_result's time with and without the counting triggers, interleaved in blocks of 5."""
    from django.db import connection

    from leaderboards.comparisons import recount_results

    out: dict[str, list[float]] = {"with counting triggers": [], "without": []}
    try:
        for block in range(2 * n // 5):
            counting = block % 2 == 0
            with connection.cursor() as cursor:
                for name in COUNTING_TRIGGERS:
                    cursor.execute(
                        f"ALTER TABLE submissions_evaluation {'ENABLE' if counting else 'DISABLE'} TRIGGER {name}"
                    )
            out["with counting triggers" if counting else "without"].extend(results.store() for _ in range(5))
    finally:
        with connection.cursor() as cursor:
            for name in COUNTING_TRIGGERS:
                cursor.execute(f"ALTER TABLE submissions_evaluation ENABLE TRIGGER {name}")
        recount_results()  # what was stored without them
    return {
        name: {"median_ms": statistics.median(ms), "p90_ms": sorted(ms)[int(0.9 * (len(ms) - 1))], "n": len(ms)}
        for name, ms in out.items()
    }


def time_pages(
    port: int, pages: dict[str, str], n: int, cold_n: int, results: Results, warmup: int = 5
) -> dict[str, dict]:
    """Warm: N requests in a row (cached aggregates reused, as between two results). Cold: before
    each request a result is stored."""
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
            results.store()
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
    parser.add_argument(
        "--cache-url",
        default="",
        help="the server's PKB_CACHE_URL, emptied first (default: a cache in each worker's memory)",
    )
    parser.add_argument("--writes", type=int, default=50, help="results stored for the write-path timing, each way")
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
    if args.cache_url:  # entries of an earlier database under the same versions would be wrong here
        import redis

        redis.Redis.from_url(args.cache_url).flushdb()
    results = Results(random.Random(11))
    port = free_port()
    server = serve(args.database_url, port, args.cache_url)
    try:  # the server goes down whatever happens
        timings = time_pages(port, pages, args.requests, args.cold_requests, results)
    finally:
        server.terminate()
        server.wait(timeout=30)
    writes = time_writes(results, args.writes)
    print(f"seeded: {json.dumps(facts)}")
    print(f"{'page':22} {'median ms':>10} {'p90 ms':>8} {'cold median':>12} {'cold max':>9} {'queries':>8} {'KiB':>6}")
    for name in pages:
        t = timings[name]
        print(
            f"{name:22} {t['median_ms']:10.1f} {t['p90_ms']:8.1f} {t['cold_median_ms']:12.1f} {t['cold_max_ms']:9.1f} "
            f"{counts[name]:8d} {t['bytes'] / 1024:6.0f}"
        )
    for name, w in writes.items():
        print(f"store_result, {name:22} median {w['median_ms']:.1f} ms, p90 {w['p90_ms']:.1f} ms ({w['n']} results)")
    if args.json:
        args.json.write_text(
            json.dumps({"facts": facts, "timings": timings, "queries": counts, "writes": writes}, indent=2)
        )


if __name__ == "__main__":
    main()
