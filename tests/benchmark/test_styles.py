from itertools import combinations

import pytest

from benchmark.corpus.styles import DOMAINS, INCOMPATIBLE_PAIRS, coherent_styles
from benchmark.models import CommunicationStyle, Domain


def test_rule_yields_24_coherent_styles():
    styles = coherent_styles()
    assert len(styles) == 24
    assert [s.index for s in styles] == list(range(1, 25))
    assert len({s.code for s in styles}) == 24
    for style in styles:
        assert len(style.high) <= 3
        assert not any(pair in INCOMPATIBLE_PAIRS for pair in combinations(sorted(style.high), 2))


@pytest.mark.parametrize(("index", "code"), [(1, "NONE"), (4, "Q"), (21, "EVA")])
def test_indices_agree_with_the_release_blueprint_suffixes(index, code):
    assert coherent_styles()[index - 1].code == code


def test_word_bounds_follow_the_documented_rule():
    by_code = {s.code: s for s in coherent_styles()}
    assert (by_code["E"].min_words, by_code["E"].max_words) == (40, 100)
    assert (by_code["P"].min_words, by_code["P"].max_words) == (5, 25)
    assert (by_code["V"].min_words, by_code["V"].max_words) == (5, 25)
    assert (by_code["QA"].min_words, by_code["QA"].max_words) == (15, 60)


@pytest.mark.django_db
def test_migration_seeded_exactly_the_rule():
    seeded = list(CommunicationStyle.objects.order_by("index"))
    assert [(s.index, s.code, s.min_words, s.max_words) for s in seeded] == [
        (s.index, s.code, s.min_words, s.max_words) for s in coherent_styles()
    ]
    eva = CommunicationStyle.objects.get(index=21)
    assert eva.expressiveness and eva.verbal_aggressiveness and eva.emotionality
    assert not (eva.preciseness or eva.questioningness or eva.impression_manipulativeness)
    assert list(Domain.objects.values_list("key", flat=True)) == [d[0] for d in DOMAINS]
