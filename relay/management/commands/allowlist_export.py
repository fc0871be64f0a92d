"""`manage.py allowlist_export`: the registry's active projects as an upstream-format allowlist.yml."""

from django.core.management.base import BaseCommand

from relay.registry.service import allowlist_export


class Command(BaseCommand):
    help = "Write the registry as an upstream-format allowlist.yml to stdout."

    def handle(self, **options):
        self.stdout.write(allowlist_export(), ending="")
