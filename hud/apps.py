from django.apps import AppConfig


class HudConfig(AppConfig):
    name = "hud"
    verbose_name = "HUD"
