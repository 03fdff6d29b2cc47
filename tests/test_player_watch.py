"""bench/player_watch.py: players found by their command line, their side by their build
directory, and their CPU time counted while watched."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from bench.player_watch import PlayerWatch

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

SPIN = "import time, sys\nend = time.perf_counter() + float(sys.argv[2])\nwhile time.perf_counter() < end: pass"


def fake_player(side_dir: str, rank: str, seconds: float) -> subprocess.Popen:
    env = {**os.environ, "TORCH_EXTENSIONS_DIR": f"/builds/{side_dir}/torch_extensions", "RANK": rank}
    return subprocess.Popen([sys.executable, "-c", SPIN, "evaluator.player", str(seconds)], env=env)


def test_each_player_is_reported_with_its_side_rank_and_cpu_time():
    with PlayerWatch() as watch:
        procs = [fake_player("reference", "0", 1.0), fake_player("0123abcd", "1", 1.0)]
        subprocess.run([sys.executable, "-c", "import time; time.sleep(0.5)"], check=True)  # not a player
        for p in procs:
            p.wait()
        time.sleep(0.1)
    rows = {r["pid"]: r for r in watch.summary()}
    assert set(rows) == {p.pid for p in procs}
    ref, sol = rows[procs[0].pid], rows[procs[1].pid]
    assert (ref["side"], ref["rank"], sol["side"], sol["rank"]) == ("reference", "0", "solution", "1")
    for r in (ref, sol):
        assert 0.2 < r["run_s"] <= 1.2, r  # a second's spin from the first sample on, on a busy host maybe half
        assert r["wait_s"] >= 0 and r["involuntary"] >= 0 and r["cpus"], r
