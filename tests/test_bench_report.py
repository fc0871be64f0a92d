"""The benchmark's report: both configurations judged side by side (devtools/bench/report.py), and
how `make bench` finds the second configuration (devtools/bench/harness.py)."""

import socket
from pathlib import Path

from devtools.bench.harness import both_targets
from devtools.bench.report import side_by_side


def figure(key, value, verdict, target="≤ 1 s", status="measured"):
    return {
        "figure": key,
        "label": key.replace("_", " "),
        "value": value,
        "unit": "s",
        "target": target,
        "verdict": verdict,
        "status": status,
    }


def test_side_by_side_shows_each_figures_verdict_in_each_configuration():
    table = side_by_side(
        {
            "SQLite + embedded broker": {"figures": [figure("fanout", 1.5, "missed"), figure("seed", 2, "info", "")]},
            "PostgreSQL + Redis": {"figures": [figure("fanout", 0.75, "met")]},
        }
    )
    fanout = next(line for line in table.splitlines() if line.startswith("fanout"))
    assert "1.50 s (≤ 1 s) ❌" in fanout and "0.75 s (≤ 1 s) ✅" in fanout
    seed = next(line for line in table.splitlines() if line.startswith("seed"))
    assert seed.rstrip().endswith("—")  # measured in one configuration only
    assert table.splitlines()[-1] == "targets met: 1 of 2 judged"


def test_side_by_side_says_which_configuration_was_not_measured():
    table = side_by_side(
        {"SQLite + embedded broker": {"figures": [figure("fanout", 0.5, "met")]}, "PostgreSQL + Redis": None}
    )
    assert "not measured" in next(line for line in table.splitlines() if line.startswith("fanout"))


def test_the_second_configuration_uses_the_configured_servers_or_else_the_local_ones():
    configured = {"DATABASE_URL": "postgres://u@db.example:6543/app", "REDIS_URL": "redis://cache.example:7000/2"}
    (bare, _), (servers, _) = both_targets(configured)
    assert (bare.vendor, bare.redis_url) == ("sqlite", None)
    assert servers.database_url == "postgres://u@db.example:6543/crcr_bench"
    assert servers.redis_url.startswith("redis://cache.example:7000/")
    (_, _), (local, _) = both_targets({"DATABASE_URL": "sqlite:///x.sqlite3"})
    assert local.vendor == "postgresql" and local.database_url.startswith("postgres://postgres@127.0.0.1:5432/")


def test_an_unreachable_server_is_named_instead_of_measured():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed_port = sock.getsockname()[1]  # bound but not listening: connections are refused
        (_, _), (servers, why_not) = both_targets(
            {"DATABASE_URL": f"postgres://postgres@127.0.0.1:{closed_port}/x", "REDIS_URL": "redis://127.0.0.1:1/0"}
        )
    assert servers.vendor == "postgresql" and f"127.0.0.1:{closed_port} is not reachable" in why_not


def test_the_public_relay_rate_the_bench_judges_against_is_the_one_the_docs_record():
    from devtools.bench.figures import PUBLIC_RELAY_CALLBACKS_PER_S

    doc = (Path(__file__).resolve().parents[1] / "docs" / "performance.md").read_text()
    section = doc.split("### The public relay", 1)[1].split("###", 1)[0]
    assert f"**{PUBLIC_RELAY_CALLBACKS_PER_S:.0f}/s**" in section


def test_a_figure_timed_with_the_stage_timers_on_shows_its_target_without_a_verdict():
    from devtools.bench.figures import PROFILES, Bench

    bench = Bench(PROFILES["tiny"], services=None, standin=None, log=lambda _line: None)
    bench.machine = {}
    bench.unjudged = "not judged: stage timers on"
    rate = bench.add("callback_throughput", "callback throughput", 500.0, "accepted/s", "≥ 1000/s", False)
    errors = bench.add("callback_errors", "callback errors", 3, "requests", "0", False)
    assert (rate.verdict, rate.status, rate.target) == ("info", "not judged: stage timers on", "≥ 1000/s")
    assert errors.verdict == "missed"  # a count of failures is judged whatever timers run


def test_each_configurations_results_are_kept_beside_the_results_file_whatever_it_is_named():
    from devtools.management.commands.bench import per_configuration

    (bare, _), (servers, _) = both_targets({"DATABASE_URL": "sqlite:///x.sqlite3"})
    assert per_configuration("var/bench/results.json", bare, "full") == Path("var/bench/results-sqlite-embedded.json")
    assert per_configuration("/tmp/run-a.json", bare, "quick") == Path("/tmp/run-a-sqlite-embedded-quick.json")
    assert per_configuration("/tmp/run-a.json", servers, "quick") == Path("/tmp/run-a-postgresql-redis-quick.json")
