"""The relay's own health, as operators and Prometheus see it.

- healthz: what /healthz reports, each dependency under a short timeout (`health_report`), and the
  worker heartbeat (`heartbeat_record`);
- probe: upstream's health probe figures per backend (nightly, PR pass rate, overdue jobs);
- alerts: upstream's dashboard rules over the probe, with their episodes (`alerts_evaluate`,
  `alert_statuses`);
- metrics: what the relay tells Prometheus (`RelayCollector`, the callback answers counter);
- exposition: the /metrics text, with the level criteria added (`exposition`);
- tasks: the heartbeat and the alerts' minute evaluation."""
