"""`manage.py bench_seed --jobs 1000000`: realistic relay and HUD history, written fast (see bench.seed).

Writes into the configured database (DATABASE_URL). It refuses to add to a database that already
holds relay data unless --reset is given, which empties every relay table first."""

import json

from django.core.management.base import BaseCommand, CommandError

from devtools.bench.seed import SeedRefused
from devtools.bench.seed import seed as seed_history


class Command(BaseCommand):
    help = "Fill the relay's tables with realistic history: projects, commits, deliveries, dispatches, job runs, failed tests."

    def add_arguments(self, parser):
        parser.add_argument("--jobs", type=int, default=1_000_000, help="JobRun rows to write (default 1,000,000)")
        parser.add_argument("--seed", type=int, default=1, help="random seed (same seed, same history)")
        parser.add_argument("--trunk-per-day", type=float, default=115.0, help="trunk commits per day (default 115)")
        parser.add_argument("--pr-heads-per-day", type=float, default=230.0, help="PR heads per day (default 230)")
        parser.add_argument(
            "--reset", action="store_true", help="empty every relay table first (projects, deliveries, jobs, ...)"
        )
        parser.add_argument("--json", action="store_true", dest="as_json", help="print the result as JSON")

    def handle(self, *args, jobs, seed: int, trunk_per_day, pr_heads_per_day, reset, as_json: bool, **options):
        if jobs < 0:
            raise CommandError("--jobs must not be negative")
        say = (lambda text: None) if as_json else (lambda text: self.stdout.write(text))
        try:
            result = seed_history(
                jobs,
                seed=seed,
                reset=reset,
                progress=say,
                trunk_per_day=trunk_per_day,
                pr_heads_per_day=pr_heads_per_day,
            )
        except SeedRefused as exc:
            raise CommandError(str(exc)) from exc
        if as_json:
            self.stdout.write(_json({**vars(result), "total_seconds": result.total_seconds}))
            return
        self.stdout.write(
            f"seeded {result.jobs:,} job rows, {result.failed_tests:,} failed tests, {result.trunk_commits:,} trunk commits, "
            f"{result.pr_heads:,} PR heads, {result.dispatches:,} dispatches, {result.projects} projects over {result.span_days} days, "
            f"{result.rollup_hours:,} hours of HUD rollups "
            f"in {result.total_seconds} s ({', '.join(f'{k} {v} s' for k, v in result.seconds.items())})"
        )
        self.stdout.write(
            "Note: the HUD's rollups were rebuilt; tallies cached for the current hour (cache) describe the old data for up to a minute."
        )


def _json(data) -> str:
    return json.dumps(data, sort_keys=True)
