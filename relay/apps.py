from django.apps import AppConfig


class RelayConfig(AppConfig):
    name = "relay"
    verbose_name = "Relay"

    def ready(self):
        from . import deploy_checks  # noqa: F401
        from .checks import receivers  # noqa: F401
        from .notify import tasks as notify_tasks  # noqa: F401 - registered with the worker at startup
        from .triage import receivers as triage_receivers  # noqa: F401
