"""`manage.py reference_import --sha SHA [--sha SHA …]` (or `--recent HOURS`): import the OpenReg
reference's runs for upstream commits from GitHub Actions."""

from django.core.management import BaseCommand, CommandError

from relay.github import client as github
from relay.reference.imports import reference_import, reference_import_sweep


class Command(BaseCommand):
    help = "Import the reference backend's upstream CI results for the given SHAs."

    def add_arguments(self, parser):
        parser.add_argument("--sha", action="append", default=[], help="a 40-hex upstream SHA (repeatable)")
        parser.add_argument(
            "--recent", type=int, metavar="HOURS", help="every recent commit still missing a reference result"
        )

    def handle(self, *args, sha, recent, **options):
        if not sha and not recent:
            raise CommandError("give --sha SHA or --recent HOURS")
        bad = [s for s in sha if len(s) != 40 or any(c not in "0123456789abcdefABCDEF" for c in s)]
        if bad:
            raise CommandError(f"not a 40-hex SHA: {', '.join(bad)}")
        try:
            lines = [reference_import(s).summary for s in sha] if sha else reference_import_sweep(hours=recent)
        except github.GitHubError as exc:
            raise CommandError(f"GitHub: {exc}") from exc
        for line in lines:
            self.stdout.write(line)
