"""The relay's admin, one module per concern: the registry and level history (projects),
deliveries and dispatches (deliveries), integration path rules (enablement), known issues,
expectations, subscriptions and mutes (triage), failure causes' issue policies (causes)."""

from . import causes, deliveries, enablement, projects, triage  # noqa: F401 - each registers its models
