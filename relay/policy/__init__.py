"""The relay's pure policy: rules every page, API field, check run and notification reads, and
none of which touch the database.

- verdicts: the one status policy of a job and a cell (`job_verdicts`, `cell_state`, `gate_overall`,
  the state words);
- testids: a test's identity across producers and devices (`TestIdResolver`, `module_of`,
  `report_ids`), with torch_device_types generated from torch (`make pytorch-fixtures`);
- links: the one place a page's path is built (`commit_path`, `backend_path`, `pr_path`,
  `public_url`, `short_sha`);
- run_links: which hosts a CI provider owns, before a visitor is sent to a reported run;
- flakiness: a test's health per backend as a state machine (`HealthState`, `step`);
- reasons: a failure's reason from its message, versioned (`reason_of`, `VERSION`), naming the
  operator a backend lacks."""
