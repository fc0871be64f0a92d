"""The callback's statements pass a value its field would store unchanged without asking the
field (relay/callbacks/job_rows.py: _stored_as_is); every such value is exactly what the field's
own preparation answers."""

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
    values = {"completed_at": datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC), "body": {"a": 1}, "tests_passed": None}
    fields = job_rows._fields(JobRun)
    assert job_rows._values(JobRun, values, connection) == [
        fields["completed_at"].get_db_prep_save(values["completed_at"], connection),
        fields["body"].get_db_prep_save(values["body"], connection),
        None,
    ]


def test_the_job_rows_strings_are_passed_as_they_are():
    as_is = job_rows._stored_as_is(JobRun, connection.vendor)
    assert as_is["delivery_key"] is str and as_is["job_name"] is str and as_is["status"] is str
    assert "completed_at" not in as_is and "body" not in as_is
