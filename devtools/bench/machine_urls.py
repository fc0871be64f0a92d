"""The benchmark's machine URLs: the product's, plus the empty view, so that the floor is measured
through the same lean handler as the callbacks (crcr/machine.py)."""

from django.urls import path

from relay.machine_urls import urlpatterns as product_machine_urlpatterns

from .urls import FLOOR_PATH, floor

urlpatterns = [path(FLOOR_PATH, floor), *product_machine_urlpatterns]
