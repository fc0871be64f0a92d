"""Keeping the store and its caches in shape; none of it decides an answer.

- cache: the cache as an optimisation only, a dead Redis is a miss (`soft_get`, `soft_set`);
- watermarks: how far the result-following sweeps got (`watermark_read`, `watermark_move`);
- retention: payloads, callback bodies and test outcomes cut after their days (`retention_sweep`);
- partitions: PostgreSQL's monthly partitions of the big tables (`plans`, `apply`);
- statistics: SQLite's planner statistics, refreshed hourly (`statistics_refresh`);
- deploy_checks: `manage.py check --deploy` findings of our own;
- tasks: the retention sweep."""
