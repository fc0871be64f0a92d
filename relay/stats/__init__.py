"""What counts, and how much: the one vocabulary of which runs each figure counts, the time windows
of the summary pages, and the tallies engine behind them.

- runkinds: the kinds of run, the one trunk rule (`trunk_commits`, `on_trunk`, `pr_heads`) and the
  table of which kinds each figure counts (`COUNTS`, `jobs_counted`, `Figure`);
- windows: the ranges and tabs of the summary pages (`WINDOWS`, `window_key`, `default_tab`);
- tallies: the status policy in SQL, the tally per backend, cached buckets and the stored hourly
  rollups (`window_buckets`, `rollups_refresh`);
- tasks: the rollups' minute refresh."""
