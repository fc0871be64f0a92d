"""`manage.py rematch_test_ids [--dry-run]`: recompute every stored failed test's identity under
relay.policy.testids' current rule and say how many rows it re-matched (relay.teststore.rematch), and
re-key the test store's rows with them (relay.teststore.store.store_rematch)."""

from django.core.management.base import BaseCommand

from relay.teststore.rematch import rematch
from relay.teststore.store import store_rematch


class Command(BaseCommand):
    help = "Re-match stored failed tests under the current test-identity rule; rewrite stored occurrence ids."

    def add_arguments(self, parser):
        parser.add_argument("--dry-run", action="store_true", help="count only, write nothing")

    def handle(self, **options):
        result = rematch(write=not options["dry_run"])
        attempts, backends = store_rematch(write=not options["dry_run"])
        self.stdout.write(
            f"{result.rematched} of {result.rows} failed-test rows re-matched; "
            f"{result.occurrences} known-issue occurrences rewritten; "
            f"test store: {attempts} attempts re-keyed, {backends} backends' flakiness states replayed"
        )
        for old, new in result.examples:
            self.stdout.write(f"  {old} -> {new}")
