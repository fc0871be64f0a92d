"""`manage.py bench` (`make bench`): the benchmarks of docs/performance.md, printed as a table and
written to var/bench/results.json. Thin: options here, the work in the `bench` package.

It never touches the development database: it creates a benchmark database next to it (SQLite
file under var/bench/, or `crcr_bench` on the configured PostgreSQL server; Redis db 15 when
REDIS_URL is set) and runs itself again against that (see bench.harness)."""

import json
import os
import signal
import time
import traceback
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from devtools.bench.harness import (
    BENCH_DIR,
    CHILD_FLAG,
    LOCAL_POSTGRES,
    STAGES_ENV,
    TARGET_ENV,
    both_targets,
    run_child,
    sends_threads,
    target_drop,
    target_for,
    target_prepare,
)
from devtools.bench.report import results_read, side_by_side

FIGURES = (
    "grid",
    "summary",
    "intake",
    "fanout",
    "callbacks",
    "memory",
    "teststore",
    "enablement",
    "causes",
    "bisection",
    "cost",
)
PARENT_FIGURES = {"cost"}
"""Measured by this process before any configuration's run: the regression guard (bench.cost)
serves each revision from a probe of its own, on a SQLite store of its own."""


class Command(BaseCommand):
    help = (
        "Run the benchmarks (webhook intake, fan-out, callbacks, grid, summary, memory, the test store, "
        "enablement) against a dedicated database."
    )
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("--only", default=",".join(FIGURES), help=f"comma-separated subset of {', '.join(FIGURES)}")
        parser.add_argument("--quick", action="store_true", help="a fast smoke run: 100 k job rows, 10 s of callbacks")
        parser.add_argument("--tiny", action="store_true", help="a seconds-long run for tests (a few thousand rows)")
        parser.add_argument("--out", default=str(BENCH_DIR / "results.json"), help="where to write the results (JSON)")
        parser.add_argument(
            "--web-workers",
            type=int,
            default=None,
            help="gunicorn workers (default as `make run`: 2 with Redis, else 1)",
        )
        parser.add_argument("--web-threads", type=int, default=8)
        parser.add_argument("--worker-concurrency", type=int, help="send threads (default as `make run`)")
        parser.add_argument(
            "--callback-clients", type=int, default=None, help="concurrent callback clients (default 8)"
        )
        parser.add_argument(
            "--db-name", default="crcr_bench", help="benchmark database name (PostgreSQL) / file stem (SQLite)"
        )
        parser.add_argument(
            "--both",
            action="store_true",
            help="SQLite + the embedded broker, then PostgreSQL + Redis (DATABASE_URL/REDIS_URL, else the local "
            "servers), and one table of every target's verdict in both (what `make bench` runs)",
        )
        parser.add_argument("--drop", action="store_true", help="drop the benchmark database afterwards")
        parser.add_argument(
            "--stages",
            action="store_true",
            help="time each step of a callback inside the web server (devtools/bench/stages.py) and print where "
            "its milliseconds go",
        )
        parser.add_argument(
            "--against",
            default=None,
            help="the regression guard (figure `cost`): the git revision whose callback CPU is measured alternately "
            "with this tree's (default: the newest tag, else devtools.bench.cost.BASELINE_REV)",
        )
        parser.add_argument("--cost-rounds", type=int, default=8, help="the guard's rounds (each revision asked once)")
        parser.add_argument("--cost-pairs", type=int, default=100, help="callback pairs per revision per round")
        parser.add_argument(
            "--ab-modules",
            type=int,
            default=None,
            help="the capabilities A/B after the guard: completions counting this many modules against none "
            "(default bench.cost.AB_MODULES; 0 skips it)",
        )
        parser.add_argument(
            "--counted-pairs",
            type=int,
            default=None,
            help="after the guard's timed rounds, each revision's instructions per request counted under callgrind "
            "over this many callback pairs (default bench.instructions.COUNTED_PAIRS; 0 skips it; skipped, "
            "and said, without valgrind)",
        )
        parser.add_argument(
            "--cost-postgres",
            action="store_true",
            help="the guard's probes on PostgreSQL (DATABASE_URL's server, else the local one), each with a "
            "database of its own, instead of SQLite",
        )
        parser.add_argument(
            "--public-relay",
            default=os.environ.get("CRCR_PUBLIC_RELAY_DIR", ""),
            help="the public relay's directory (its local_server.py and .venv), run beside us for the one-client "
            "callback figure; absent or not runnable: the recorded rate is used, and the figure says so",
        )
        parser.add_argument("--timeout", type=float, default=2400, help="give up after this many seconds")

    def handle(self, *args, **options):
        only = [name.strip() for name in options["only"].split(",") if name.strip()]
        unknown = sorted(set(only) - set(FIGURES))
        if unknown:
            raise CommandError(f"unknown figure(s) {', '.join(unknown)}; choose from {', '.join(FIGURES)}")
        options["only"] = only
        if os.environ.get(CHILD_FLAG):
            code = self.child(options)
            if code:
                raise CommandError("the benchmark run failed (see above)")
            return
        self.parent(options)

    # --- parent: prepare the benchmark database, run the child against it ---------------------------------

    def parent(self, options) -> None:
        if "cost" in options["only"] or options["against"]:
            self.cost(options)
        options["only"] = [name for name in options["only"] if name not in PARENT_FIGURES]
        if not options["only"]:
            return
        if not options["both"]:
            self.run_against(target_for(os.environ, options["db_name"]), options)
            return
        documents, failed = {}, []
        for target, why_not in both_targets(os.environ, options["db_name"]):
            if why_not:
                self.stdout.write(f"bench: {target.label} not measured: {why_not}")
                documents[target.label] = None
                continue
            copy = per_configuration(options["out"], target, _profile(options))
            copy.unlink(missing_ok=True)  # a run that fails before writing it must not show an older run's
            try:
                self.run_against(target, options)
            except CommandError as exc:
                failed.append(f"{target.label}: {exc}")
            documents[target.label] = results_read(copy)
        self.stdout.write("\n" + side_by_side(documents))
        if failed:
            raise CommandError("; ".join(failed))

    def cost(self, options) -> None:
        """The callback's CPU per request, this tree's and another revision's, in turn (bench.cost)."""
        from devtools.bench import cost, instructions

        # tiny (the smoke test): the guard's machinery against this very commit, whatever history the clone has
        against = options["against"] or ("HEAD" if options["tiny"] else cost.against_default(cost.git))
        self.stdout.write(f"bench: the callback's CPU, this tree against {against} (in process, alternately)")
        rounds, pairs = (2, 10) if options["tiny"] else (options["cost_rounds"], options["cost_pairs"])
        postgres = ""
        if options["cost_postgres"]:
            configured = os.environ.get("DATABASE_URL", "")
            postgres = configured if configured.startswith("postgres") else LOCAL_POSTGRES
        modules = options["ab_modules"]
        modules = (0 if options["tiny"] else cost.AB_MODULES) if modules is None else modules
        counted = options["counted_pairs"]
        counted = (0 if options["tiny"] else instructions.COUNTED_PAIRS) if counted is None else counted
        summaries = cost.compare(
            against,
            rounds,
            pairs,
            BENCH_DIR / "cost",
            log=self.stdout.write,
            postgres=postgres,
            modules=modules,
            counted_pairs=counted,
        )
        out = Path(options["out"]).with_name("cost.json")
        out.parent.mkdir(parents=True, exist_ok=True)
        store = "postgresql" if postgres else "sqlite"
        document = {"against": against, "rounds": rounds, "pairs": pairs, "store": store, **summaries}
        out.write_text(json.dumps(document, indent=2))
        self.stdout.write(f"wrote {out}\n")

    def run_against(self, target, options) -> None:
        self.stdout.write(f"bench: {target.label}; figures: {', '.join(options['only'])}; profile: {_profile(options)}")
        target_prepare(target, log=self.stdout.write)
        try:
            code = run_child(target, self.child_argv(options), timeout=options["timeout"])
        finally:
            if options["drop"]:
                target_drop(target)
        if code:
            raise CommandError(f"bench failed (exit status {code})")

    def child_argv(self, options) -> list[str]:
        argv = [
            "--only",
            ",".join(options["only"]),
            "--out",
            str(Path(options["out"]).resolve()),
            "--db-name",
            options["db_name"],
            "--web-threads",
            str(options["web_threads"]),
        ]
        if options["worker_concurrency"]:
            argv += ["--worker-concurrency", str(options["worker_concurrency"])]
        if options["web_workers"]:
            argv += ["--web-workers", str(options["web_workers"])]
        if options["callback_clients"]:
            argv += ["--callback-clients", str(options["callback_clients"])]
        argv += ["--quick"] if options["quick"] else []
        argv += ["--tiny"] if options["tiny"] else []
        argv += ["--stages"] if options["stages"] else []
        argv += ["--public-relay", options["public_relay"]] if options["public_relay"] else []
        return argv

    # --- child: the harness ---------------------------------------------------------------------------------

    def child(self, options) -> int:
        from django.conf import settings

        from devtools.bench import figures
        from devtools.bench.harness import APP_ID, ServiceConfig, Services, Target
        from devtools.bench.report import configuration, cpu_calibration_ms, results_write, table
        from devtools.bench.seed import seed
        from devtools.standin import StandIn

        signal.signal(signal.SIGTERM, _interrupt)  # so `finally` stops the servers
        if options["stages"]:
            os.environ[STAGES_ENV] = "1"  # the web server's environment (harness.child_env) passes it on
        target = Target.from_json(os.environ[TARGET_ENV])
        profile = figures.PROFILES[_profile(options)]
        if options["callback_clients"]:
            profile = replace(profile, callback_clients=options["callback_clients"])
        workers = options["web_workers"] or (2 if settings.REDIS_URL else 1)
        config = ServiceConfig(workers, options["web_threads"], options["worker_concurrency"] or sends_threads())
        log_dir = BENCH_DIR / f"logs-{target.slug}"
        log = self.stdout.write
        started_at, started = datetime.now(UTC), time.monotonic()
        standin = StandIn(app_id=APP_ID).start()
        services = Services(target, config, standin, log_dir, log)
        bench = figures.Bench(profile, services, standin, log)
        bench.public_relay = options["public_relay"]
        only, code = options["only"], 0
        calibration = {"start": cpu_calibration_ms()}
        try:
            self.pages(bench, only, seed)
            self.relay(bench, only)
            if "teststore" in only or "causes" in only:
                from devtools.bench.teststore import test_store

                bench.begin()
                test_store(bench, measure="teststore" in only)
            if "enablement" in only:
                from devtools.bench.enablement import enablement

                enablement(bench)
            if "causes" in only:
                from devtools.bench.causes import causes

                bench.begin()
                causes(bench)
            if "bisection" in only:
                from devtools.bench.bisection import bisection

                bench.begin()
                bisection(bench)
        except KeyboardInterrupt:
            log("interrupted; stopping everything")
            code = 130
        except Exception:  # noqa: BLE001 - report what was measured, then fail
            log(traceback.format_exc())
            for proc in (services.web, services.worker):
                if proc is not None:
                    log(f"--- {proc.name} log tail ---\n{proc.log_tail(2000)}")
            code = 1
        finally:
            services.close()
            standin.stop()
        calibration["end"] = cpu_calibration_ms()
        config_doc = configuration(target, config.describe(), profile.name, calibration)
        out = Path(options["out"])
        extra = [per_configuration(out, target, profile.name)]
        results_write(bench.results, config_doc, started_at, time.monotonic() - started, out, extra)
        log("")
        log(table(bench.results, config_doc))
        log(f"\nwrote {out} ({time.monotonic() - started:.0f} s)")
        return code

    def pages(self, bench, only, seed) -> None:
        from devtools.bench import figures

        p, services = bench.profile, bench.services
        sizes = []
        if "grid" in only:
            sizes.append(("small", p.small_jobs))
        if "grid" in only or "summary" in only:
            sizes.append(("large", p.large_jobs))
        grid_ms = {}
        for size, jobs in sizes:
            bench.log(f"seeding {jobs:,} job rows")
            bench.begin()
            result = seed(jobs, reset=True, page_commits=p.page_commits)
            bench.store = {"jobs": result.jobs}
            bench.add(
                f"seed_{size}",
                f"seed {result.jobs:,} job rows (bench_seed)",
                result.total_seconds,
                "s",
                "",
                None,
                **{k: v for k, v in vars(result).items() if k != "seconds"},
                phases=result.seconds,
            )
            services.start_web()
            if "grid" in only:
                grid_ms[size] = figures.grid(bench, size)
            if size == "large" and "summary" in only:
                figures.summary(bench)
            if size == "large":
                figures.memory(bench, "_pages", f"after the pages over {result.jobs:,} rows", web_only=True)
            services.stop_web()
        if grid_ms.get("small") and grid_ms.get("large"):
            bench.machine = {}
            ratio = round(grid_ms["large"] / grid_ms["small"], 3)
            bench.add(
                "grid_render_ratio",
                f"grid render {p.large_jobs // 1000:,} k / {p.small_jobs // 1000:,} k rows",
                ratio,
                "×",
                "≤ 2",
                ratio <= 2,
            )

    def relay(self, bench, only) -> None:
        from devtools.bench import figures

        if not {"intake", "fanout", "callbacks", "memory"} & set(only):
            return
        from relay.models import Project

        services = bench.services
        seeded = list(Project.objects.filter(active=True))
        figures.projects_activate([])  # the seeded store's backends step aside; each figure registers its own
        try:
            services.start_web()  # a fresh web process: its peak RSS is the relay's, not the pages'
            if "intake" in only:
                figures.intake(bench)
            if {"fanout", "callbacks", "memory"} & set(only):
                services.purge_broker()
                services.start_worker()
            if "fanout" in only:
                figures.fanout(bench)
            if "callbacks" in only:
                figures.callbacks(bench)
            if "memory" in only:
                figures.memory(bench)
            services.check_alive()
        finally:
            figures.projects_activate(seeded)  # the benchmark database stays browsable as seeded


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def per_configuration(out, target, profile: str) -> Path:
    """The results file's copy named after the configuration (and the profile, unless full), beside
    it: what `--both` reads back for its side-by-side table, whatever `--out` names (with another
    name than results.json the table read no file and judged nothing, and the second
    configuration overwrote the first's results)."""
    suffix = "" if profile == "full" else f"-{profile}"
    out = Path(out)
    return out.with_name(f"{out.stem}-{target.vendor}-{target.broker}{suffix}.json")


def _profile(options) -> str:
    return "tiny" if options["tiny"] else "quick" if options["quick"] else "full"
