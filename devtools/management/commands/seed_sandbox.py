"""`manage.py seed_sandbox`: upsert the sandbox registry (idempotent)."""

from django.core.management.base import BaseCommand

from devtools.sandbox_registry import seed_sandbox_registry


class Command(BaseCommand):
    help = "Upsert the sandbox registry: the mission systems, the OpenReg reference and the health probe."

    def handle(self, **options):
        projects = seed_sandbox_registry()
        self.stdout.write(f"sandbox registry: {len(projects)} projects")
