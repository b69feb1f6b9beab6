"""annotation.sql.rater_lock: reads the study's status under the rater's row lock, and (for a
hand-out, PostgreSQL) relaxes only that transaction's commit — never an answer's."""

import pytest
from django.db import connection, transaction

from annotation.models import Study, StudyStatus
from annotation.sql import rater_lock
from tests.annotation.conftest import rater

pytestmark = pytest.mark.django_db(transaction=True)


def _setting() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        return cursor.fetchone()[0]


def test_the_status_is_read_afresh(make_study):
    study = make_study()
    one = rater(study, study.raters.first().user)
    Study.objects.filter(pk=study.pk).update(status=StudyStatus.CLOSED)
    with transaction.atomic():
        assert rater_lock(one).study.status == StudyStatus.CLOSED


@pytest.mark.skipif(connection.vendor != "postgresql", reason="synchronous_commit is PostgreSQL's")
def test_a_relaxed_commit_lasts_only_for_its_transaction(make_study):
    study = make_study()
    one = rater(study, study.raters.first().user)
    assert _setting() == "on"
    with transaction.atomic():
        rater_lock(one)
        assert _setting() == "on"  # an answer's transaction: committed to disk
    with transaction.atomic():
        rater_lock(one, relaxed_commit=True)
        assert _setting() == "off"
    assert _setting() == "on"
