"""Hooks for the parts of the relay that react to what intake and callbacks record (check runs,
the merge gate, oncall pings). Each is sent after the writing transaction commits, with ids
only; receivers re-read the rows and must be quick (enqueue, don't call GitHub inline)."""

from django.dispatch import Signal

job_recorded = Signal()
"""A callback (or the sweeper) changed a JobRun. kwargs: job_run_id."""

delivery_recorded = Signal()
"""A webhook delivery was stored. kwargs: delivery_pk, event, action, outcome."""

dispatch_sent = Signal()
"""A dispatch reached GitHub. kwargs: dispatch_id."""
