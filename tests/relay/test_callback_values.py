"""The callback's statements pass a value its field would store unchanged without asking the
field (relay/callbacks/job_rows.py: _stored_as_is); every such value is exactly what the field's
own preparation answers."""

import json
from datetime import UTC, datetime

import pytest
from django.db import connection

from relay.callbacks import job_rows
from relay.models import FailedTest, JobRun, UsedToken

SAMPLES = {str: "a value", bool: True, int: 7}


@pytest.mark.parametrize("model", [JobRun, UsedToken, FailedTest])
def test_a_value_passed_as_it_is_is_what_its_field_prepares(model):
    fields = job_rows._fields(model)
    for name, kind in job_rows._stored_as_is(model, connection.vendor).items():
        prepared = fields[name].get_db_prep_save(SAMPLES[kind], connection)
        assert prepared == SAMPLES[kind] and type(prepared) is kind, name


def test_values_of_other_types_still_go_through_their_field():
    values = {"completed_at": datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC), "run_attempt": 2.0, "tests_passed": None}
    fields = job_rows._fields(JobRun)
    assert job_rows._values(JobRun, values, connection) == [
        fields["completed_at"].get_db_prep_save(values["completed_at"], connection),
        fields["run_attempt"].get_db_prep_save(values["run_attempt"], connection),
        None,
    ]


def test_the_job_rows_strings_are_passed_as_they_are():
    as_is = job_rows._stored_as_is(JobRun, connection.vendor)
    assert as_is["delivery_key"] is str and as_is["job_name"] is str and as_is["status"] is str
    assert "completed_at" not in as_is and "body" not in as_is


def _json_of(prepared) -> str:
    """The JSON text a prepared JSON value stands for: the text itself on SQLite, what the Jsonb
    dumps on PostgreSQL."""
    if isinstance(prepared, str):
        return prepared
    return (prepared.dumps or json.dumps)(prepared.obj)


@pytest.mark.parametrize(
    "body",
    [
        {"workflow": {"name": "ci", "module_counts": {"test/test_nn.py": {"passed": 3}}}, "n": [1, 2.5, None, True]},
        {"text": "naïve ☃ \u2028", "big": 2**70, "neg": -(2**63)},  # past 64 bits: written by json
        [{"a": []}, "x"],
    ],
)
def test_a_json_column_holds_the_json_djangos_field_would_write(body):
    field = job_rows._fields(JobRun)["body"]
    ours = job_rows._values(JobRun, {"body": body}, connection)[0]
    djangos = field.get_db_prep_save(body, connection)
    assert json.loads(_json_of(ours)) == json.loads(_json_of(djangos)) == body
    assert type(ours) is type(djangos)


def test_what_orjson_would_write_otherwise_goes_to_json():
    with pytest.raises(TypeError):  # json refuses a datetime, as Django's JSONField does
        job_rows._json_text({"at": datetime(2026, 1, 1, tzinfo=UTC)})
