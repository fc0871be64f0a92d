"""The level loop: which level each backend has earned, and the pull requests that move it.

- criteria: the level criteria and the one `level_change` rule;
- readiness: what the criteria read (tallies, excused failures, E2E P50, tenure) and their verdict
  (`readiness_inputs`, `backend_readiness`); e2e: upstream's per-run E2E P50;
- status: every backend's level status in upstream's shape (`level_status`);
- events: the at-risk event subscribers hear about;
- demotion: deciding a demotion PR (`demotion_decide`); demotion_sync: making GitHub agree;
  allowlist_moves: the in-place edit of upstream's allowlist.yml a demotion PR carries;
- tasks: the demotion loop's reconcile and the level events' minute detection."""
