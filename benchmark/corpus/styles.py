"""The 24 communication styles and the five domains, as seeded into the database.

The Communication Styles Inventory has six traits, each high or low: 64 combinations. ProactBench
keeps 24 "psychologically coherent" ones without publishing the rule, so the Workbench states its
own (docs/styles.md), chosen to agree with every style index/suffix pair seen in the release:

1. At most three traits are high (a speaker with four salient traits reads as a caricature).
2. Four pairs never co-occur, because they pull a speaker in opposite directions:
   expressiveness + preciseness (animated and wordy vs. exact and economical),
   preciseness + emotionality (controlled vs. affect-driven),
   questioningness + verbal aggressiveness (inviting other views vs. dismissing them),
   verbal aggressiveness + impression manipulativeness (hostile vs. ingratiating).
3. Indices run by number of high traits, then in trait order E, P, Q, V, A, M — which puts NONE
   at 1, Q at 4 and EVA at 21, as in the release's blueprint suffixes.

Word bounds per user message: expressive styles talk (40–100 words); precise or verbally
aggressive ones are terse (5–25); every other style is moderate (15–60).
"""

from dataclasses import dataclass
from itertools import combinations

TRAITS: tuple[tuple[str, str, str], ...] = (
    # (letter, field name, adjective used in descriptions)
    ("E", "expressiveness", "expressive and animated"),
    ("P", "preciseness", "precise and exact"),
    ("Q", "questioningness", "full of questions"),
    ("V", "verbal_aggressiveness", "blunt to the point of abrasive"),
    ("A", "emotionality", "openly emotional"),
    ("M", "impression_manipulativeness", "flattering and image-conscious"),
)
INCOMPATIBLE_PAIRS = frozenset({("E", "P"), ("P", "A"), ("Q", "V"), ("V", "M")})
MAX_HIGH_TRAITS = 3

TALKATIVE = (40, 100)
TERSE = (5, 25)
MODERATE = (15, 60)


@dataclass(frozen=True)
class StyleSpec:
    index: int
    code: str
    high: frozenset[str]
    min_words: int
    max_words: int
    description: str

    def trait_flags(self) -> dict[str, bool]:
        return {field: letter in self.high for letter, field, _ in TRAITS}


def _word_bounds(high: frozenset[str]) -> tuple[int, int]:
    if "E" in high:
        return TALKATIVE
    if "P" in high or "V" in high:
        return TERSE
    return MODERATE


def _describe(high: frozenset[str], bounds: tuple[int, int]) -> str:
    adjectives = [adjective for letter, _, adjective in TRAITS if letter in high]
    who = "; ".join(adjectives) if adjectives else "no salient trait: plain and neutral"
    return f"{who[0].upper()}{who[1:]}. Messages of {bounds[0]}–{bounds[1]} words."


def coherent_styles() -> list[StyleSpec]:
    letters = [letter for letter, _, _ in TRAITS]
    specs: list[StyleSpec] = []
    for size in range(MAX_HIGH_TRAITS + 1):
        for combo in combinations(letters, size):
            if any(pair in INCOMPATIBLE_PAIRS for pair in combinations(combo, 2)):
                continue
            high = frozenset(combo)
            bounds = _word_bounds(high)
            specs.append(
                StyleSpec(
                    index=len(specs) + 1,
                    code="".join(combo) or "NONE",
                    high=high,
                    min_words=bounds[0],
                    max_words=bounds[1],
                    description=_describe(high, bounds),
                )
            )
    return specs


DOMAINS: tuple[tuple[str, str, str], ...] = (
    ("professional_persona", "Professional", "Work: projects, clients, teams, tools."),
    ("sports_persona", "Sports & fitness", "Training, coaching, events, recovery."),
    ("arts_persona", "Arts & culture", "Making, showing and organising creative work."),
    ("travel_persona", "Travel & exploration", "Trips, routes, logistics, new places."),
    ("culinary_persona", "Food & cooking", "Cooking, hosting, menus, food businesses."),
)
