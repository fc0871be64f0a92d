"""`manage.py providers_export`: the registry's Buildkite pipeline mappings as an upstream-format
config/ci_providers.yml."""

from django.core.management.base import BaseCommand

from relay.registry.service import providers_export


class Command(BaseCommand):
    help = "Write the registry's Buildkite pipeline mappings as an upstream-format ci_providers.yml to stdout."

    def handle(self, **options):
        self.stdout.write(providers_export(), ending="")
