import io

import pytest
from django.core.management import call_command

from benchmark.evaluation.demo_run import DEMO_RUN_NAME
from benchmark.models import EvaluationRun


@pytest.fixture
def demo_run(db):
    """The demo corpus and its completed run: 3 models × 2 conditions × every trigger, judged
    by two judges that sometimes disagree."""
    call_command("load_demo", "--no-users", stdout=io.StringIO())
    return EvaluationRun.objects.get(name=DEMO_RUN_NAME)
