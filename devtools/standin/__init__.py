"""A local stand-in for GitHub's REST API and CI OIDC issuers, for tests and sandbox mode."""

from .server import StandIn

__all__ = ["StandIn"]
