"""End to end through real processes: web server, web-side worker with the scheduler, GPU workers
in cpu mode, PostgreSQL, and RabbitMQ or Redis. Each test owns its database, queues and processes."""

from __future__ import annotations

import re
import time

import pytest
import requests
from celery import Celery
from pkb_stack import CORRECT_SOLUTION, SLOW_SOLUTION, csrf_token, free_port, submission_finished, wait_for

from evaluator.results import Digests, Mode, Result, Settings, ShapeResult, Status, summarize
from evaluator.worker import RECORD_STAGE, STORE_RESULT, common_settings, declare_queue

pytestmark = [pytest.mark.services, pytest.mark.slow, pytest.mark.timeout(240)]


def assert_exactly_once(stack, ids, rows, attempts=1):
    stored = stack.stored_counts()
    assert {i: stored[i] for i in ids} == {i: 1 for i in ids}, stack.tail_logs()
    for i in ids:
        row = rows[i]
        assert (row["state"], row["status"], row["correct"]) == ("done", "correct", True), row
        assert row["has_result"] and row["output_digest"], row
        if attempts is not None:
            assert row["attempts"] == attempts, row


def test_browser_submission_end_to_end(make_stack, rabbitmq):
    """Log in, submit the form, see the queue position while no worker runs, then get the result."""
    stack = make_stack(rabbitmq)
    hardware = stack.hardware_slug("cpu")
    stack.setup([hardware], users={"ada": "integration-pass-1234"})
    port = free_port()
    server = stack.web_server(port)
    web = stack.web_worker()
    base = f"http://127.0.0.1:{port}"
    wait_for(lambda: _get(base + "/accounts/login/"), 60, "the web server")
    stack.wait_ready(web)

    browser = requests.Session()
    login = browser.get(base + "/accounts/login/")
    browser.post(
        base + "/accounts/login/",
        data={
            "username": "ada",
            "password": "integration-pass-1234",
            "csrfmiddlewaretoken": csrf_token(login.text),
        },
        headers={"Referer": base + "/accounts/login/"},
    )
    form = browser.get(base + "/submit/")
    assert form.status_code == 200 and hardware in form.text
    posted = browser.post(
        base + "/submit/",
        data={
            "csrfmiddlewaretoken": csrf_token(form.text),
            "problem": "allreduce",
            "model_tag": "human",
            "backend": "pytorch",
            "hardware": hardware,
            "code": CORRECT_SOLUTION.replace("\n", "\r\n"),
            "sample_index": "0",
            "run_label": "",
        },
        headers={"Referer": base + "/submit/"},
    )
    match = re.search(r"/submissions/(\d+)/", posted.url)
    assert posted.status_code == 200 and match, posted.text[-2000:]
    submission_id = int(match.group(1))

    # No GPU worker yet: the evaluation waits first in its queue, and the hardware's backlog says so.
    api = browser.get(f"{base}/api/submissions/{submission_id}").json()
    (evaluation,) = api["evaluations"]
    assert (evaluation["state"], evaluation["queue_position"]) == ("queued", 1)
    backlog = {hw["slug"]: hw["queued"] for hw in browser.get(base + "/api/hardware").json()}
    assert backlog[hardware] == 1

    stack.gpu_worker(hardware, "gpu0")
    done = wait_for(lambda: submission_finished(browser, base, submission_id), 120, "the evaluation", interval=0.5)
    (evaluation,) = done["evaluations"]
    assert (evaluation["state"], evaluation["status"], evaluation["correct"]) == ("done", "correct", True)
    assert evaluation["queue_position"] is None and evaluation["output_digest"]
    detail = browser.get(f"{base}/api/evaluations/{evaluation['id']}").json()
    Result.from_dict(detail["result"])
    assert detail["result"]["mode"] == "cpu" and detail["result"]["problem"] == "allreduce"
    assert browser.get(f"{base}/submissions/{submission_id}/").status_code == 200
    assert_exactly_once(stack, [evaluation["id"]], stack.evaluations([evaluation["id"]]))
    assert server.alive()


def test_worker_killed_mid_evaluation_completes_once_elsewhere(make_stack, rabbitmq):
    stack = make_stack(rabbitmq)
    hardware = stack.hardware_slug("a")
    stack.setup([hardware])
    stack.wait_ready(stack.web_worker())
    workers = {name: stack.gpu_worker(hardware, name) for name in ("gpu0", "gpu1")}
    for proc in workers.values():
        stack.wait_ready(proc)
    (evaluation,) = stack.submit([hardware], SLOW_SOLUTION.format(seconds=2))

    row = wait_for(
        lambda: _row_if(stack, evaluation, lambda r: r["state"] == "running" and r["stage"] == "building"),
        90,
        "the evaluation to be building",
    )
    victim = next(name for name in workers if row["worker"].startswith(name + "@"))
    workers[victim].kill_tree()

    rows = stack.wait_finished([evaluation], 150)
    survivor = next(name for name in workers if name != victim)
    assert rows[evaluation]["worker"].startswith(survivor + "@"), rows[evaluation]
    assert_exactly_once(stack, [evaluation], rows, attempts=2)


def test_broker_restart_mid_run_loses_nothing(make_stack, private_rabbit):
    stack = make_stack(private_rabbit.url)
    hardware = stack.hardware_slug("a")
    stack.setup([hardware])
    stack.wait_ready(stack.web_worker())
    for name in ("gpu0", "gpu1"):
        stack.wait_ready(stack.gpu_worker(hardware, name))
    ids = stack.submit([hardware], SLOW_SOLUTION.format(seconds=1), count=2)
    wait_for(lambda: any(r["state"] == "running" for r in stack.evaluations(ids).values()), 90, "a running evaluation")

    private_rabbit.kill()
    # Submitted while the broker is down: stored, published later by the reaper.
    ids += stack.submit([hardware], CORRECT_SOLUTION, count=1)
    time.sleep(2)
    private_rabbit.start()

    rows = stack.wait_finished(ids, 200)
    assert_exactly_once(stack, ids, rows, attempts=None)


def test_duplicated_result_is_stored_once(make_stack, rabbitmq):
    """A result delivered twice, and one from a stale delivery, change the row once."""
    stack = make_stack(rabbitmq)
    hardware = stack.hardware_slug("a")
    stack.setup([hardware])
    stack.wait_ready(stack.web_worker())
    (evaluation,) = stack.submit([hardware], CORRECT_SOLUTION)  # no GPU worker: we play its part
    token = str(wait_for(lambda: stack.evaluations([evaluation])[evaluation]["dispatch_token"], 20, "publication"))

    app = Celery("fake-gpu", set_as_current=False)
    app.conf.update(common_settings(rabbitmq))
    web_queue = declare_queue(stack.web_queue)

    def send(name, *args):
        app.send_task(name, args=list(args), queue=web_queue)

    first, second = _document("correct"), _document("incorrect")
    send(RECORD_STAGE, evaluation, token, "starting", "fake-gpu")
    send(STORE_RESULT, evaluation, token, first)
    send(STORE_RESULT, evaluation, token, first)
    send(STORE_RESULT, evaluation, token, second)
    send(STORE_RESULT, evaluation, "00000000-0000-0000-0000-000000000000", second)
    rows = stack.wait_finished([evaluation], 30)
    wait_for(
        lambda: stack.procs[0].log().count(f"evaluation {evaluation}: result ignored") >= 3,
        20,
        "every delivery to be handled",
    )
    assert stack.stored_counts()[evaluation] == 1
    assert (rows[evaluation]["status"], rows[evaluation]["attempts"]) == ("correct", 1)
    stored = stack.sql("SELECT result FROM submissions_evaluation WHERE id = %s", (evaluation,))[0]["result"]
    assert stored == first


def test_many_submissions_two_queues_four_workers_exactly_once(make_stack, rabbitmq):
    stack = make_stack(rabbitmq)
    queues = [stack.hardware_slug("a"), stack.hardware_slug("b")]
    stack.setup(queues)
    stack.wait_ready(stack.web_worker(concurrency=2))
    workers = [stack.gpu_worker(queues[i % 2], f"gpu{i}") for i in range(4)]
    for proc in workers:
        stack.wait_ready(proc)
    started = time.monotonic()
    ids = stack.submit(queues, CORRECT_SOLUTION, count=6)
    rows = stack.wait_finished(ids, 200)
    elapsed = time.monotonic() - started
    assert_exactly_once(stack, ids, rows)
    by_worker = {}
    for row in rows.values():
        by_worker.setdefault(row["worker"].split("@")[0], set()).add(row["id"])
    assert len(by_worker) == 4, by_worker  # every worker took part
    print(f"6 evaluations, 2 queues, 4 workers: {elapsed:.1f} s")


def test_redis_broker_lost_worker_is_reaped(make_stack, redis_broker):
    """On Redis an unacknowledged delivery comes back only after the visibility timeout (hours):
    the reaper notices the silent worker and publishes the evaluation again."""
    stack = make_stack(redis_broker)
    hardware = stack.hardware_slug("a")
    stack.setup([hardware])
    stack.wait_ready(stack.web_worker())
    victim = stack.gpu_worker(hardware, "gpu0")
    stack.wait_ready(victim)
    slow, quick = stack.submit([hardware], [SLOW_SOLUTION.format(seconds=2), CORRECT_SOLUTION])
    wait_for(lambda: _row_if(stack, slow, lambda r: r["state"] == "running"), 90, "the evaluation to start")
    stack.gpu_worker(hardware, "gpu1")  # starts while gpu0 is busy: it takes the other one first
    wait_for(lambda: _row_if(stack, slow, lambda r: r["stage"] == "building"), 90, "the evaluation to be building")
    victim.kill_tree()

    rows = stack.wait_finished([slow, quick], 150)
    assert_exactly_once(stack, [quick], rows)
    assert_exactly_once(stack, [slow], rows, attempts=2)
    assert "lost" in stack.procs[0].log()


# ---- helpers --------------------------------------------------------------------------------------


def _get(url):
    try:
        return requests.get(url, timeout=2).status_code == 200
    except requests.RequestException:
        return False



def _row_if(stack, evaluation, predicate):
    row = stack.evaluations([evaluation])[evaluation]
    return row if predicate(row) else None


def _document(status: str) -> dict:
    status = Status(status)
    correct = status is Status.CORRECT
    shape = ShapeResult(
        name="default",
        dims={"M": 1024, "N": 1024},
        default=True,
        correct=correct,
        max_abs_error=0.0 if correct else 1.0,
        solution=None,
        reference=None,
        speedup=None,
        roofline=None,
        digests=Digests(solution=["a" * 64, "b" * 64], reference=["a" * 64, "b" * 64]),
        notes=[],
    )
    return Result(
        status=status,
        reason="" if correct else "wrong sum on rank 1",
        failing_rank=None if correct else 1,
        problem="allreduce",
        mode=Mode.CPU,
        world_size=2,
        hardware="h100",
        timings_meaningful=False,
        settings=Settings(warmup=1, iters=3, trials=1, timeout_s=60.0),
        shapes=[shape],
        summary=summarize([shape], status),
        stages={},
        environment={"sandboxed": True},
        log_tail="",
        started_at="",
        finished_at="",
    ).to_dict()
