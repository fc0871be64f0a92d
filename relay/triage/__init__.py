"""Triage of failures: known issues (relay.triage.issues), each backend's published expectations
(relay.triage.expectations), and the one matching rule both use (relay.triage.matching)."""
