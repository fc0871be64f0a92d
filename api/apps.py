from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "api"
    verbose_name = "REST API"

    def ready(self):
        from . import schema  # noqa: F401 - registers the OpenAPI security scheme
