"""The test store's write side: each (backend, commit)'s non-passing test outcomes under the
identity rule (`store`), the flakiness steps of relay.policy.flakiness, the clustering of stored
failures by reason (`causes`, relay.policy.reasons), stored ids read again under a changed identity
rule (`rematch`), and the minute sweep that runs them and files the causes' issues (`tasks`).
Read through relay.results.tests and relay.results.causes."""
