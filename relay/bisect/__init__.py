"""Verified culprits: a backend's new backend-only failure bisected over the upstream commits it
spans, by dispatching them, until one commit is named and verified (it fails, its parent passes).

- ranges: the first-parent commits between the last pass and the failure (GitHub's compare API);
- start: when to bisect (a backend-only failure, not flaky, spanning more than one commit);
- probes: one repository_dispatch per commit tried, within the backend's daily budget, and what
  the run that answered it says about the tests;
- search: the binary search and the verification, moved one step per decided probe;
- tasks: the Celery tasks (ids in, rows re-read) and the sweep that resumes any bisection.

The rows (relay.models.bisection) hold every step, so a restart resumes where it stopped."""
