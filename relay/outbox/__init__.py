"""One outbox engine for everything the relay sends to GitHub: repository dispatches
(relay.dispatching) and upstream writes such as check runs, comments and re-runs
(relay.checks.outbox).

A row per intended send is claimed with a conditional UPDATE, sent, and recorded together with
its attempt row in one transaction. Transient failures back off (capped, jittered, GitHub's hints
honoured, stored on the row); permanent ones stop and stay visible; a beat sweeper re-sends what
is due or was abandoned by a dead worker. Each kind supplies only what differs: how to send one
row and which outcomes end it (`relay.outbox.engine.Outbox`), and its own retry settings
(`<prefix>_MAX_ATTEMPTS`, `_BACKOFF_BASE_SECONDS`, `_BACKOFF_MAX_SECONDS`, `_MAX_AGE_HOURS`,
`_LEASE_SECONDS`).

Kept free of imports here: relay.models imports the abstract models from relay.outbox.models."""
