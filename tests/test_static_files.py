"""Static files as production serves them: `collectstatic` writes hashed names and gzip copies
(gzip only: brotli made `collectstatic`, which `make run` runs, ten times slower), and WhiteNoise serves a hashed name compressed with a far-future, immutable
Cache-Control (a plain name only briefly), so the 1.2 MB chart library is fetched once."""

import pytest
from django.core.management import call_command
from django.template import Context, Template
from django.test import RequestFactory, override_settings
from whitenoise.middleware import WhiteNoiseMiddleware

MANIFEST = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}


@pytest.fixture(scope="module")
def collected(tmp_path_factory):
    root = tmp_path_factory.mktemp("static")
    with override_settings(STORAGES=MANIFEST, STATIC_ROOT=root):
        call_command("collectstatic", interactive=False, verbosity=0)
        yield root


def hashed(name: str) -> str:
    return Template("{% load static %}{% static name %}").render(Context({"name": name}))


def fetch(root, path: str, encoding: str = "gzip, deflate, br"):
    with override_settings(STORAGES=MANIFEST, STATIC_ROOT=root):
        middleware = WhiteNoiseMiddleware(lambda request: pytest.fail(f"{path} was not served as a static file"))
        return middleware(RequestFactory().get(path, HTTP_ACCEPT_ENCODING=encoding))


def test_pages_link_hashed_names_and_compressed_copies_exist(collected):
    with override_settings(STORAGES=MANIFEST, STATIC_ROOT=collected):
        url = hashed("vendor/plotly-basic.min.js")
    assert url.startswith("/static/vendor/plotly-basic.min.") and url != "/static/vendor/plotly-basic.min.js"
    stored = collected / url.removeprefix("/static/")
    assert stored.exists() and stored.with_name(stored.name + ".gz").exists()
    assert stored.with_name(stored.name + ".gz").stat().st_size < stored.stat().st_size / 3


def test_a_hashed_name_is_served_compressed_and_cached_for_good(collected):
    with override_settings(STORAGES=MANIFEST, STATIC_ROOT=collected):
        url = hashed("css/crcr.css")
    response = fetch(collected, url)
    assert response.status_code == 200 and response["Content-Encoding"] == "gzip"
    assert "immutable" in response["Cache-Control"] and "max-age=315360000" in response["Cache-Control"]


def test_a_plain_name_is_only_cached_briefly(collected):
    response = fetch(collected, "/static/css/crcr.css")
    assert response.status_code == 200 and "immutable" not in response["Cache-Control"]
