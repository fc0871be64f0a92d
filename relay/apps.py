from django.apps import AppConfig


class RelayConfig(AppConfig):
    name = "relay"
    verbose_name = "Relay"

    def ready(self):
        from . import deploy_checks  # noqa: F401
        from .checks import receivers  # noqa: F401
