"""What counts: the one vocabulary of which runs each figure counts, and the time windows of the
summary pages. Low in the house: the read model, the callback and the tallies all ask it.

- runkinds: the kinds of run, the one trunk rule (`trunk_commits`, `on_trunk`, `pr_heads`) and the
  table of which kinds each figure counts (`COUNTS`, `jobs_counted`, `Figure`);
- windows: the ranges and tabs of the summary pages (`WINDOWS`, `window_key`, `default_tab`).

The tallies that count over these windows are relay.tallies."""
