import os

from django.core.wsgi import get_wsgi_application

from .body_deadline import BodyDeadline

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "crcr.settings")
pages = get_wsgi_application()  # sets Django up, so the machine handler below can load

from .machine import MachineHandler, machine_or_pages  # noqa: E402 - needs the settings configured

application = BodyDeadline(machine_or_pages(pages, MachineHandler()))
