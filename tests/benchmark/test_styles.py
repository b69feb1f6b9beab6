import pytest

from benchmark.corpus.styles import (
    DOMAINS,
    RELEASE_TABLE,
    TRAITS,
    coherent_styles,
    suffix_fits_style,
)
from benchmark.models import CommunicationStyle, Domain

# Every (style_combination_index, blueprint-id suffix) pair in the release's
# dataset/validation_results.jsonl (250 blueprints: 25 scenarios x 10 styles), with how often it
# occurs. Read off the file for docs/styles.md; the counts are the release's, not ours.
RELEASE_SUFFIXES: dict[int, dict[str, int]] = {
    1: {"NONE": 8},
    2: {"IM": 8, "NONE": 2},
    3: {"E": 12},
    4: {"Q": 11},
    5: {"QI": 6, "QIM": 3},
    6: {"QE": 6},
    7: {"VA": 10},
    8: {"VE": 7, "VAE": 6},
    9: {"VQ": 12, "VAQ": 2},
    10: {"VQE": 8},
    11: {"P": 9},
    12: {"PI": 7, "PIM": 5},
    13: {"PQ": 9},
    14: {"PQI": 5, "PQIM": 4},
    15: {"E": 9},
    16: {"EI": 4, "E": 1, "EIM": 1},
    17: {"EE": 10},
    18: {"EQ": 13, "E": 1},
    19: {"EQI": 5, "EQIM": 3},
    20: {"EQE": 13},
    21: {"EVA": 8, "EV": 5},
    22: {"EVE": 9, "EVAE": 4},
    23: {"EVQ": 12},
    24: {"EVQE": 11, "EVAQEM": 1},
}


def test_the_table_has_24_distinct_styles_with_unique_codes():
    styles = coherent_styles()
    assert [s.index for s in styles] == list(range(1, 25))
    assert len({s.high for s in styles}) == 24
    assert len({s.code for s in styles}) == 24
    assert sum(RELEASE_SUFFIXES[i][s] for i in RELEASE_SUFFIXES for s in RELEASE_SUFFIXES[i]) == 250


@pytest.mark.parametrize(
    ("index", "suffix"),
    [(index, suffix) for index, seen in RELEASE_SUFFIXES.items() for suffix in seen],
)
def test_every_release_label_fits_its_style(index, suffix):
    assert suffix_fits_style(suffix, RELEASE_TABLE[index])


def test_a_code_fits_only_styles_holding_all_its_traits():
    # The one exception is the release's own: a lone 'E' spells expressiveness (style 15) and
    # emotionality (style 3) alike.
    for spec in coherent_styles():
        for other in coherent_styles():
            if spec.code != "E" and suffix_fits_style(spec.code, other.high):
                assert spec.high <= other.high, (spec.code, other.index)


@pytest.mark.parametrize(
    ("suffix", "index"),
    [("EVA", 4), ("Q", 7), ("P", 15), ("IM", 3), ("EVQE", 23), ("VAQ", 7), ("X", 1)],
)
def test_a_label_naming_a_trait_the_style_lacks_does_not_fit(suffix, index):
    assert not suffix_fits_style(suffix, RELEASE_TABLE[index])


@pytest.mark.parametrize(
    ("index", "code"),
    [(1, "NONE"), (4, "Q"), (21, "EVA"), (9, "VAQ"), (8, "VAEM"), (24, "EVAQEM"), (2, "IM")],
)
def test_codes_spell_every_trait_in_full_in_the_release_order(index, code):
    assert coherent_styles()[index - 1].code == code


def test_word_bounds_are_the_releases_chatty_or_terse():
    for spec in coherent_styles():
        chatty = "E" in spec.high
        assert (spec.min_words, spec.max_words) == ((40, 100) if chatty else (5, 25)), spec


@pytest.mark.django_db
def test_migrations_seeded_exactly_the_table():
    seeded = list(CommunicationStyle.objects.order_by("index"))
    assert [(s.index, s.code, s.min_words, s.max_words, s.description) for s in seeded] == [
        (s.index, s.code, s.min_words, s.max_words, s.description) for s in coherent_styles()
    ]
    for style in seeded:
        present = {key for key, field, _ in TRAITS if getattr(style, field)}
        assert present == set(RELEASE_TABLE[style.index]), style.index
    eva = CommunicationStyle.objects.get(index=21)
    assert eva.expressiveness and eva.verbal_aggressiveness
    assert not (eva.preciseness or eva.questioningness or eva.emotionality)
    assert list(Domain.objects.values_list("key", flat=True)) == [d[0] for d in DOMAINS]
