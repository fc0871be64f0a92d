"""The settings every benchmark process runs with: the product's, plus one URL the product does
not have — an empty view behind the same middleware, to measure the floor Django's request
cycle puts under every callback (docs/performance.md, "Callbacks")."""

from crcr.settings import *  # noqa: F403 - the product's settings, unchanged but for the URL conf

ROOT_URLCONF = "devtools.bench.urls"
