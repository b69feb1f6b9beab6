"""The 24 communication styles and the five domains, as seeded into the database.

The Communication Styles Inventory has six traits, each present or absent: 64 combinations, of
which ProactBench keeps 24. The table below is the release's own (boson-ai/ProactBench,
``proactbench/styles.py``, which lists each combination's traits by index); docs/styles.md says
where every entry was checked.

Blueprint ids end with a label of the style (``BP_PROFESSIONAL_01_EVA`` is style 21). The
release's Planner model wrote those labels, so they vary: a trait has more than one spelling
(verbal aggressiveness ``VA`` or ``V``, emotionality ``EM`` or ``E``, impression manipulativeness
``IM`` or ``I``) and 4 of its 250 blueprints leave a trait out. ``suffix_fits_style`` is the
rule the import's ``style_code_mismatch`` finding applies; a style's ``code`` is its one
unambiguous spelling (every trait in full, in the release's order).

Word bounds per user message are the release's: expressive styles are chatty (40–100 words),
every other style is terse (5–25).
"""

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache

# (key, field name, adjective used in descriptions), in the release's trait order, which is also
# the order its blueprint labels write them in. The key is the trait's full spelling in a label.
TRAITS: tuple[tuple[str, str, str], ...] = (
    ("E", "expressiveness", "talkative and animated"),
    ("P", "preciseness", "precise and economical"),
    ("VA", "verbal_aggressiveness", "blunt and demanding"),
    ("Q", "questioningness", "probing the reasoning behind answers"),
    ("EM", "emotionality", "openly emotional"),
    ("IM", "impression_manipulativeness", "flattering and image-conscious"),
)
# Every spelling of a trait seen in the release's blueprint labels (docs/styles.md has counts).
SPELLINGS: dict[str, tuple[str, ...]] = {
    "E": ("E",),
    "P": ("P",),
    "VA": ("VA", "V"),
    "Q": ("Q",),
    "EM": ("EM", "E"),
    "IM": ("IM", "I"),
}
NO_TRAIT = "NONE"

# index -> the traits present, from the release's table.
RELEASE_TABLE: dict[int, tuple[str, ...]] = {
    1: (),
    2: ("IM",),
    3: ("EM",),
    4: ("Q",),
    5: ("Q", "IM"),
    6: ("Q", "EM"),
    7: ("VA",),
    8: ("VA", "EM"),
    9: ("VA", "Q"),
    10: ("VA", "Q", "EM"),
    11: ("P",),
    12: ("P", "IM"),
    13: ("P", "Q"),
    14: ("P", "Q", "IM"),
    15: ("E",),
    16: ("E", "IM"),
    17: ("E", "EM"),
    18: ("E", "Q"),
    19: ("E", "Q", "IM"),
    20: ("E", "Q", "EM"),
    21: ("E", "VA"),
    22: ("E", "VA", "EM"),
    23: ("E", "VA", "Q"),
    24: ("E", "VA", "Q", "EM"),
}

CHATTY = (40, 100)
TERSE = (5, 25)


@dataclass(frozen=True)
class StyleSpec:
    index: int
    code: str
    high: frozenset[str]
    """Keys (``TRAITS``) of the traits present."""
    min_words: int
    max_words: int
    description: str

    def trait_flags(self) -> dict[str, bool]:
        return {field: key in self.high for key, field, _ in TRAITS}

    def row(self) -> dict[str, object]:
        """The seeded CommunicationStyle's fields other than ``index`` (the migrations')."""
        return {
            "code": self.code,
            "description": self.description,
            "min_words": self.min_words,
            "max_words": self.max_words,
            **self.trait_flags(),
        }


def _ordered(keys: Iterable[str]) -> list[str]:
    wanted = set(keys)
    return [key for key, _, _ in TRAITS if key in wanted]


def _describe(high: frozenset[str], bounds: tuple[int, int]) -> str:
    adjectives = [adjective for key, _, adjective in TRAITS if key in high]
    who = "; ".join(adjectives) if adjectives else "no salient trait: plain and neutral"
    return f"{who[0].upper()}{who[1:]}. Messages of {bounds[0]}–{bounds[1]} words."


@cache
def coherent_styles() -> tuple[StyleSpec, ...]:
    specs = []
    for index, traits in sorted(RELEASE_TABLE.items()):
        high = frozenset(traits)
        bounds = CHATTY if "E" in high else TERSE
        specs.append(
            StyleSpec(
                index=index,
                code="".join(_ordered(high)) or NO_TRAIT,
                high=high,
                min_words=bounds[0],
                max_words=bounds[1],
                description=_describe(high, bounds),
            )
        )
    return tuple(specs)


def word_count(text: str) -> int:
    """Words in a user message, as the style's word bounds count them: whitespace-separated
    tokens. The curation loop's check and the import's ``user_turn_length_outside_style``
    finding both use this, so a curated turn that passed is never flagged on import."""
    return len(text.split())


def suffix_fits_style(suffix: str, high: Iterable[str]) -> bool:
    """Whether a blueprint label is a spelling of (some of) these traits: each named trait the
    style has, in the release's order, in one of its spellings; ``NONE`` names none. A label
    that leaves a trait out fits (the release has four); one naming a trait the style lacks
    does not."""
    traits = _ordered(high)

    def spells(rest: str, start: int) -> bool:
        if not rest:
            return True
        return any(
            rest.startswith(spelling) and spells(rest[len(spelling) :], position + 1)
            for position in range(start, len(traits))
            for spelling in SPELLINGS[traits[position]]
        )

    return suffix == NO_TRAIT or (bool(suffix) and spells(suffix, 0))


DOMAINS: tuple[tuple[str, str, str], ...] = (
    ("professional_persona", "Professional", "Work: projects, clients, teams, tools."),
    ("sports_persona", "Sports & fitness", "Training, coaching, events, recovery."),
    ("arts_persona", "Arts & culture", "Making, showing and organising creative work."),
    ("travel_persona", "Travel & exploration", "Trips, routes, logistics, new places."),
    ("culinary_persona", "Food & cooking", "Cooking, hosting, menus, food businesses."),
)
