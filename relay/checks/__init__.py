"""The upstream PR integration: check runs for L3/L4 backends, the merge gate, oncall comments,
re-runs, labels and the issues filed for failure causes, each an upstream write sent through one
durable outbox (`outbox.write_prepare` picks each kind's code, the level loop's demotion PRs
among them); `reactions` decides what a record asks for and `tasks` runs it."""
