"""What gunicorn serves in the benchmark: the product's WSGI application, or, with
CRCR_BENCH_STAGES=1, the same with the stage timer outermost in the machine handler's middleware
(devtools/bench/stages.py; the pages get it through settings.MIDDLEWARE)."""

import os

from crcr.wsgi import application, pages  # sets Django up

if os.environ.get("CRCR_BENCH_STAGES") == "1":
    from crcr.body_deadline import BodyDeadline
    from crcr.machine import MACHINE_MIDDLEWARE, MachineHandler, machine_or_pages

    from .stages import StageMiddleware

    application = BodyDeadline(machine_or_pages(pages, MachineHandler((StageMiddleware, *MACHINE_MIDDLEWARE))))
