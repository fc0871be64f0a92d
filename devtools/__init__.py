"""Development-only tools, kept apart from the product: the benchmarks (`bench/`), the local GitHub
stand-in and sandbox simulators (`standin/`), and the management commands that drive them
(`bench`, `bench_seed`, `runstack`, `seed_sandbox`, `sandbox_registry_dump`).

The production image does not ship this package, and settings install the app only when it is in
the source tree and `CRCR_DEVTOOLS` does not turn it off (see crcr/settings.py). The product
(crcr, relay, hud, api) never imports it; tests/test_layering.py holds that rule.

Importing this package must stay cheap and Django-free: the stand-in runs from it
(`python -m devtools.standin`) in processes that never load Django."""
