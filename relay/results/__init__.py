"""The results read model: how the relay's recorded jobs read as cells, the OpenReg baseline
comparison, culprit ranges ("since which commit") and the known-issue join, all judged by the
policy in relay.policy.verdicts. Below relay.checks and relay.notify, which read results through it, and
below the HUD and the API, which shape its answers into pages and JSON."""
