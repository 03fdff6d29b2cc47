"""A history of results (new ones, reruns superseding older ones, a rerun finishing late, hidden
ones, edits, a submission handed to another account, vouching changes, deletions) after each step
of which what the comparison pages and the catalog read (ResultCount, per-problem cached parts,
memoized figures, the hardware comparison's first rows, best speedups, solved counts) is checked
against the straightforward computation from the evaluations. `run()` needs a migrated, empty
database and a real cache; test_result_counts.py runs it on PostgreSQL and, in a subprocess, on
SQLite."""

from __future__ import annotations

import importlib
import math
import random
from collections import Counter, defaultdict

from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.db import connection
from django.db.models import Count, F, Max
from django.test import Client

from catalog.sync import ensure_cpu_hardware, hardware_from_profile
from leaderboards import comparisons, metrics
from leaderboards.ranking import best_speedups, current, eligible, solved_counts
from submissions.models import (
    Evaluation,
    Hardware,
    ModelName,
    Problem,
    ProblemResultsVersion,
    ResultCount,
    Submission,
)

STATUSES = ("correct", "correct", "correct", "incorrect", "compile_error", "runtime_error", "timeout", "rejected")
# Thresholds themselves and their neighbours: a count that differs from the direct one shows here.
SPEEDUPS = (1.0, 1.5, 3.0, 0.1, 2.0, math.nextafter(1.0, 2.0), math.nextafter(1.5, 0.0), 0.42, 7.0, 1e-9)
UTILIZATIONS = (0.5, 0.55, 1.0, 0.05, None, math.nextafter(0.5, 0.0), 0.73)


def reference_compare_models(hardware, models=None, level=None, include_unverified=False):
    """(n_problems, scores, by_level) as computed before ResultCount: every model at once, from the
    evaluations."""
    levels = dict(Problem.objects.filter(active=True).values_list("id", "level"))
    per_level = Counter(levels.values())
    grouped = defaultdict(list)
    for row in comparisons.direct_per_problem_counts(hardware, models, list(levels), include_unverified):
        row["level"] = levels[row["problem_id"]]
        grouped[row["model_tag"]].append(row)
    n_problems = per_level[level] if level is not None else len(levels)
    in_scope = {m: [r for r in rows if level is None or r["level"] == level] for m, rows in grouped.items()}
    scores = sorted(
        (comparisons._scores(m, rows, n_problems) for m, rows in in_scope.items() if rows),
        key=lambda s: (-(s.fast_1 or 0), -(s.fast_0 or 0), s.model),
    )
    one = f"fast_{metrics.P_GRID.index(1.0)}"
    by_level = {
        lvl: {
            m: (
                metrics.estimate([(r["n"], r["correct_n"]) for r in rows if r["level"] == lvl], per_level[lvl]),
                metrics.estimate([(r["n"], r[one]) for r in rows if r["level"] == lvl], per_level[lvl]),
            )
            for m, rows in grouped.items()
        }
        for lvl in sorted(per_level)
    }
    return n_problems, scores, by_level


def reference_pairs(a, b, problem=None) -> tuple:
    """pair_summary's figures from every pair, in Python."""
    on_a = current(a).filter(hidden=False)
    if problem is not None:
        on_a = on_a.filter(problem=problem)
    on_b = {e.submission_id: e for e in current(b).filter(hidden=False)}
    pairs = [(x, on_b[x.submission_id]) for x in on_a if x.submission_id in on_b]
    logs = [math.log(y.speedup / x.speedup) for x, y in pairs if x.speedup and y.speedup]
    return (
        len(pairs),
        sum(x.status == "correct" and y.status == "correct" for x, y in pairs),
        sum(x.output_digest is not None and x.output_digest == y.output_digest for x, y in pairs),
        sum(x.output_digest is not None and y.output_digest is not None for x, y in pairs),
        math.exp(math.fsum(logs) / len(logs)) if logs else None,
        len(logs),
        math.fsum(v * v for v in logs) / len(logs) if logs else None,
    )


def reference_paired_ids(a, b, problem, limit):
    on_b = current(b).filter(hidden=False)
    on_a = current(a).filter(hidden=False, submission_id__in=on_b.values("submission_id"))
    if problem is not None:
        on_a = on_a.filter(problem=problem)
    return list(
        on_a.order_by("problem__level", "problem__pkb_id", "-speedup", "pk").values_list("pk", flat=True)[:limit]
    )


def fingerprints_in_sql(hardware, include_unverified) -> dict:
    query = comparisons._count_query(hardware, None, None, include_unverified)
    return dict(comparisons._fetch(comparisons._FINGERPRINTS_SQL.format(rows=query[0]), query[1]))


def fingerprints_in_python(hardware, include_unverified) -> dict:
    rows = comparisons._by_model(comparisons._count_rows(hardware, None, None, include_unverified))
    return {model: comparisons._fingerprint(r) for model, r in rows.items()}


def same_figures(got: tuple, want: tuple) -> bool:
    """Counts equal; the means equal up to rounding (sums taken in another order)."""
    return (
        got[:4] == want[:4]
        and got[5] == want[5]
        and all(
            (x is None) == (y is None) and (x is None or math.isclose(x, y, rel_tol=1e-12, abs_tol=1e-15))
            for x, y in ((got[4], want[4]), (got[6], want[6]))
        )
    )


class History:
    def __init__(self, seed: int = 3):
        self.rng = random.Random(seed)
        User = get_user_model()
        self.alice, self.bob, self.carol = (User.objects.create_user(n) for n in ("alice", "bob", "carol"))
        ensure_cpu_hardware()
        self.cpu = Hardware.objects.get(slug="cpu")
        self.h200 = hardware_from_profile("h200x4", "h200", 4)
        self.h200.save()
        self.hardware = (self.cpu, self.h200)
        shapes = [{"name": "default", "dims": {"M": 64}, "default": True}]
        common = {"parallelism": "TP", "shapes": shapes, "world_sizes": [2, 4]}
        self.problems = [
            Problem.objects.create(slug="p-one", pkb_id=1, title="One", level=1, **common),
            Problem.objects.create(slug="p-two", pkb_id=None, title="Two", level=2, **common),
            Problem.objects.create(slug="p-three", pkb_id=3, title="Three", level=2, **common),
        ]
        gpt = ModelName.objects.create(name="gpt", owner=self.alice)
        gpt.vouched_accounts.add(self.bob)
        ModelName.objects.create(name="glm", owner=self.carol)
        self.submissions = []

    def submit(self, owner, problem, model_tag, sample_index=0) -> Submission:
        sub = Submission.objects.create(
            problem=problem, owner=owner, model_tag=model_tag, sample_index=sample_index, backend="cuda",
            code=f"# {model_tag} {sample_index} {len(self.submissions)}\n",
        )  # fmt: skip
        self.submissions.append(sub)
        return sub

    def outcome(self) -> dict:
        status = self.rng.choice(STATUSES)
        correct = status == "correct"
        return {
            "status": status,
            "correct": correct,
            "speedup": self.rng.choice(SPEEDUPS) if correct else None,
            "utilization": self.rng.choice(UTILIZATIONS) if correct else None,
            "output_digest": self.rng.choice(("a", "b", None)) if status in ("correct", "incorrect") else None,
        }

    def queue(self, sub, hardware) -> Evaluation:
        return Evaluation.objects.create(submission=sub, hardware=hardware, world_size=2, mode=hardware.mode)

    def finish(self, evaluation, **fields) -> None:
        """What storing a result does: one UPDATE of the queued row."""
        Evaluation.objects.filter(pk=evaluation.pk).update(state="done", stage="done", **{**self.outcome(), **fields})

    def done(self, sub, hardware, **fields) -> Evaluation:
        """A finished evaluation written in one INSERT (as a bulk load or the admin would)."""
        return Evaluation.objects.create(
            submission=sub, hardware=hardware, world_size=2, mode=hardware.mode, state="done",
            **{**self.outcome(), **fields},
        )  # fmt: skip

    def check(self, step: str) -> None:
        problems = [None, *self.problems]
        ranked = eligible().values("problem_id", "hardware_id").order_by()
        best = {(r["problem_id"], r["hardware_id"]): r["best"] for r in ranked.annotate(best=Max("speedup"))}
        assert best_speedups() == best, step
        assert best_speedups([self.problems[0].pk]) == {k: v for k, v in best.items() if k[0] == self.problems[0].pk}
        solved = eligible().values("problem_id").order_by().annotate(n=Count("submission_id", distinct=True))
        assert solved_counts() == {r["problem_id"]: r["n"] for r in solved}, step
        for hw in self.hardware:
            for unverified in (False, True):
                got = comparisons.per_problem_counts(hw, include_unverified=unverified)
                assert got == comparisons.direct_per_problem_counts(hw, include_unverified=unverified), step
                want_tags = sorted({r["model_tag"] for r in got})
                if connection.vendor == "postgresql":  # the database's fingerprints are _fingerprint's
                    assert fingerprints_in_sql(hw, unverified) == fingerprints_in_python(hw, unverified), step
                assert comparisons.model_tags(hw, unverified) == want_tags, step
                for level, models in ((None, None), (2, None), (None, ["glm", "nobody"])):
                    cmp = comparisons.compare_models(hw, models, level, unverified)
                    n_problems, scores, by_level = reference_compare_models(hw, models, level, unverified)
                    where = f"{step}: {hw} level {level} models {models} unverified {unverified}"
                    assert cmp.n_problems == n_problems, where
                    assert cmp.scores == scores, where
                    assert cmp.by_level == by_level, where
        for a in self.hardware:
            for b in self.hardware:
                if a == b:
                    continue
                for problem in problems:
                    where = f"{step}: {a} vs {b}, problem {problem}"
                    got, want = comparisons.pair_summary(a, b, problem), reference_pairs(a, b, problem)
                    assert same_figures(got, want), (where, got, want)
                    for limit in (3, 200):
                        assert comparisons._paired_ids(a, b, problem, limit) == reference_paired_ids(
                            a, b, problem, limit
                        ), where


def run() -> None:
    h = History()
    p1, p2, p3 = h.problems
    alice, bob, carol = h.alice, h.bob, h.carol
    h.check("empty")

    # Samples of three models, some runs vouched for (alice's and bob's gpt), some not (carol's gpt,
    # anyone's unregistered "anon"), on both hardware; half stored by UPDATE, half by INSERT.
    for owner, model, problem, samples in (
        (alice, "gpt", p1, 4), (alice, "gpt", p2, 2), (bob, "gpt", p1, 2), (carol, "gpt", p3, 2),
        (carol, "glm", p1, 3), (carol, "glm", p2, 1), (bob, "anon", p2, 2), (alice, "gpt", p3, 1),
    ):  # fmt: skip
        for s in range(samples):
            sub = h.submit(owner, problem, model, s)
            for hw in h.hardware:
                if h.rng.random() < 0.5:
                    h.finish(h.queue(sub, hw))
                else:
                    h.done(sub, hw)
    h.check("first results")

    sub = h.submit(alice, p2, "gpt", 7)
    waiting = h.queue(sub, h.h200)
    h.check("a queued evaluation counts nowhere")
    h.finish(waiting, status="correct", correct=True, speedup=1.5, utilization=0.5)
    h.check("a new result lands")

    target = h.submissions[0]
    h.finish(h.queue(target, h.h200), status="timeout", correct=False, speedup=None, utilization=None)
    h.check("a rerun supersedes the older result")
    h.done(target, h.h200, status="correct", correct=True, speedup=3.0, utilization=1.0)
    h.check("a rerun written in one INSERT supersedes")

    late = h.queue(h.submissions[1], h.cpu)
    h.done(h.submissions[1], h.cpu)
    h.finish(late)
    assert Evaluation.objects.get(pk=late.pk).superseded
    h.check("a run finishing after a newer one is superseded at once")

    Evaluation.objects.filter(submission_id__in=[s.pk for s in h.submissions[2:4]]).update(hidden=True)
    h.check("results hidden (several rows in one statement)")
    Evaluation.objects.filter(submission=h.submissions[2]).update(hidden=False)
    h.check("shown again")

    edited = Evaluation.objects.filter(state="done", superseded=False, status="correct").first()
    Evaluation.objects.filter(pk=edited.pk).update(speedup=2.0, utilization=0.05, output_digest="z")
    h.check("a stored result edited")
    Evaluation.objects.filter(pk=edited.pk).update(state="failed")
    h.check("a result no longer done")

    Submission.objects.filter(pk=h.submissions[5].pk).update(owner=carol)
    h.check("a submission handed to another account")
    moved = Submission.objects.get(pk=h.submissions[6].pk)
    moved.owner = alice
    moved.save()
    h.check("a submission handed over through save()")

    Submission.objects.filter(pk=h.submissions[3].pk).update(model_tag="glm")
    h.check("a submission's model tag corrected")
    retagged = Submission.objects.get(pk=h.submissions[4].pk)
    retagged.model_tag = "anon"
    retagged.save()
    h.check("a model tag corrected through save()")
    assert not Evaluation.objects.exclude(model_tag=F("submission__model_tag")).exists(), "stale model tags"

    ModelName.objects.get(name="gpt").vouched_accounts.add(carol)
    h.check("the owner vouches for another account")
    ModelName.objects.filter(name="glm").delete()
    h.check("a name unregistered")

    Submission.objects.filter(pk__in=[s.pk for s in h.submissions[8:10]]).delete()
    h.check("submissions deleted with their evaluations")

    Problem.objects.filter(pk=p3.pk).update(active=False)
    h.check("a problem retired")

    before = sorted(ResultCount.objects.filter(n__gt=0).values_list(
        "hardware_id", "problem_id", "model_tag", "submitter_id", *comparisons.COUNTS
    ))  # fmt: skip
    comparisons.recount_results()
    after = sorted(ResultCount.objects.values_list(
        "hardware_id", "problem_id", "model_tag", "submitter_id", *comparisons.COUNTS
    ))  # fmt: skip
    assert after == before, "recounting from scratch gives what the triggers kept"
    h.check("recounted")

    # What migration 0007 does to a database that already holds results: triggers, then counts.
    migration = importlib.import_module("submissions.migrations.0008_result_counts")
    with connection.schema_editor() as editor:
        migration.drop(None, editor)
        ResultCount.objects.all().delete()
        ProblemResultsVersion.objects.all().delete()
        migration.create(None, editor)
    cache.clear()  # the problem versions started again
    backfilled = sorted(ResultCount.objects.values_list(
        "hardware_id", "problem_id", "model_tag", "submitter_id", *comparisons.COUNTS
    ))  # fmt: skip
    assert backfilled == before, "the migration's counts are what the triggers kept"
    h.finish(h.queue(h.submissions[3], h.cpu))
    h.check("a result after the migration")

    client = Client()
    for path in (
        "/", "/compare/models/?hardware=cpu&hardware_b=h200x4", "/compare/models/?hardware=h200x4&unverified=1&level=2",
        "/compare/models/?hardware=cpu&models=gpt", "/compare/hardware/?a=cpu&b=h200x4",
        "/compare/hardware/?a=h200x4&b=cpu&problem=p-two", f"/problems/{p1.slug}/", f"/problems/{p1.slug}/leaderboard/cpu/",
        "/api/compare/models?hardware=cpu", "/api/compare/hardware?a=cpu&b=h200x4",
    ):  # fmt: skip
        response = client.get(path)
        assert response.status_code == 200, (path, response.status_code)
