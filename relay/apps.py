from django.apps import AppConfig


class RelayConfig(AppConfig):
    name = "relay"
    verbose_name = "Relay"

    def ready(self):
        from relay import tasks  # noqa: F401 - every task registered in every process
        from relay.ops import deploy_checks  # noqa: F401 - start-up checks (SECRET_KEY, credentials)
