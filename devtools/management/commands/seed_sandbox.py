"""`manage.py seed_sandbox`: upsert the sandbox registry (idempotent)."""

import os

from django.core.management.base import BaseCommand

from devtools.sandbox_registry import seed_sandbox_registry
from devtools.sandbox_triage import seed_sandbox_triage


class Command(BaseCommand):
    help = "Upsert the sandbox registry: the mission systems, the OpenReg reference and the health probe."

    def handle(self, **options):
        projects = seed_sandbox_registry()
        self.stdout.write(f"sandbox registry: {len(projects)} projects")
        triage = seed_sandbox_triage(os.environ.get("CRCR_SANDBOX_SINK_URL", ""))
        self.stdout.write(f"sandbox triage: {triage['issues']} known issues made, expectations and the webhook sink subscription in place")
