import os

from django.core.wsgi import get_wsgi_application

from .body_deadline import BodyDeadline

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "crcr.settings")
application = BodyDeadline(get_wsgi_application())
