"""The upstream PR integration: check runs for L3/L4 backends, the merge gate, oncall comments
and re-runs, all written through one durable outbox (see outbox.py)."""
