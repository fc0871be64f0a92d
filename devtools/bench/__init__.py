"""`make bench`: the benchmark harness for the relay and the HUD.

- `bench.seed`     realistic history, written fast (`manage.py bench_seed`);
- `bench.harness`  the benchmark's own database, broker, web server, Celery worker and GitHub
                   stand-in, started and always stopped again;
- `bench.load`     request builders and small HTTP load generators (client-side timing);
- `bench.figures`  one function per figure of docs/performance.md;
- `bench.paired`   two sides measured in turn, judged by neighbouring rounds (the guard, the
                   public relay beside us, the callback's floor);
- `bench.report`   the table and var/bench/results.json.

`manage.py bench` never touches the development database: it re-runs itself with DATABASE_URL
(and REDIS_URL) pointing at a dedicated benchmark database and Redis db (see bench.harness)."""
