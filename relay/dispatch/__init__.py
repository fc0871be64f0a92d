"""Dispatch: one repository_dispatch per registered downstream for each upstream event, durably.

- fan_out: the Dispatch rows of a delivery (`dispatches_create`, `dispatches_resend`);
- sending: sending one through the outbox engine (`dispatch_send`);
- payloads: what a downstream receives; results_sweep: jobs that never reported, ended;
- tasks: the fan-out, the sends and their sweeper."""
