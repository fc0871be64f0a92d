from django.apps import AppConfig


class RelayConfig(AppConfig):
    name = "relay"
    verbose_name = "Relay"

    def ready(self):
        from .checks import reactions as receivers  # noqa: F401
