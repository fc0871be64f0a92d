"""Fixtures the HUD view tests share."""

from tests.hud.test_views_grid import world  # noqa: F401  (a small store of commits, backends and results)
