"""The settings every benchmark process runs with: the product's, plus one URL the product does
not have — an empty view behind the callbacks' own middleware, to measure the floor Django's request
cycle puts under every callback (docs/performance.md, "Callbacks")."""

import os

from crcr.settings import *  # noqa: F403 - the product's settings, unchanged but for the URL conf

ROOT_URLCONF = "devtools.bench.urls"
MACHINE_URLCONF = "devtools.bench.machine_urls"  # the floor view behind the callbacks' own stack

if os.environ.get("CRCR_BENCH_STAGES") == "1":
    MIDDLEWARE = ["devtools.bench.stages.StageMiddleware", *MIDDLEWARE]  # noqa: F405
