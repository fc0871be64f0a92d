"""The OpenAPI schema validates with no warnings, and the docs load from our own static files."""

import pytest
from django.core.management import call_command


def test_the_openapi_schema_validates_without_warnings(tmp_path):
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yml"))
    assert "/api/v1/jobs/" in (tmp_path / "schema.yml").read_text()


@pytest.mark.django_db
def test_the_docs_page_uses_no_cdn(client):
    page = client.get("/api/docs/").content.decode()
    assert "swagger-ui" in page
    assert "cdn." not in page and "unpkg" not in page and "jsdelivr" not in page


@pytest.mark.django_db
def test_the_schema_is_served(client):
    response = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
