from dataclasses import dataclass
from functools import cache, lru_cache
from html import escape
from typing import NamedTuple, cast

from django import template
from django.forms import BoundField, ChoiceField
from django.utils.html import format_html
from django.utils.safestring import SafeString

from annotation.kinds.base import StudyKind
from annotation.models import FlagCategory
from core.long_text import max_display_chars
from core.markdown import readable
from core.turn_images import turn_images_markup

register = template.Library()


@dataclass(frozen=True)
class Radio:
    data: dict
    choice_label: str
    tag: SafeString
    keys: str = ""  # the option's keyboard keys, space-separated (``data-keys``)
    kbd: str = ""  # the one shown on it


@register.filter
def radios(field: BoundField) -> tuple[Radio, ...]:
    """A radio field's options, used like iterating the bound field (``radio.data.value``,
    ``radio.choice_label``, ``radio.tag``) but written here: Django renders every option
    through a template of its own, which made the answer form most of a workspace's render
    time (the annotation load benchmark, bench/README.md). Same markup as Django's."""
    return _radios(*_radios_key(field))


def _radios_key(field: BoundField) -> tuple:
    """All that a radio field's options depend on (the arguments of ``_radios``)."""
    chosen = field.value()
    chosen = {str(v) for v in chosen} if isinstance(chosen, list | tuple) else {str(chosen)}
    choice_field = cast(ChoiceField, field.field)
    options = cast(list[tuple[object, object]], choice_field.choices)  # normalised by Django
    choices = tuple((str(value), str(label)) for value, label in options)
    keys = getattr(field.form, "keys", {}).get(field.name, {})
    return (
        field.html_name,
        field.auto_id,
        choices,
        field.field.required,
        bool(field.errors),
        frozenset(value for value, _ in choices if value in chosen),
        tuple(tuple(keys.get(value, ())) for value, _ in choices),
    )


@register.filter
def keyed_options(field: BoundField, class_prefix: str = "") -> SafeString:
    """A radio field's options as labels answering their keys, each
    ``<label class="opt" data-keys="…">input label <kbd>key</kbd></label>``; with
    ``class_prefix`` (``"verdict"``) each label also has the class ``verdict-<value>`` (the
    value lower-cased). The markup the templates' loop over ``radios`` wrote, written at once:
    that loop was a tenth of the workspace's render time (four variables an option). Like
    the options, written once per combination of what it depends on."""
    return _keyed_options(_radios_key(field), class_prefix)


@register.filter
def shift_options(field: BoundField) -> SafeString:
    """The confidence options (Shift+1 … Shift+5): ``<label class="opt"
    data-shift-keys="value">input label</label>`` each (see ``keyed_options``)."""
    return _shift_options(_radios_key(field))


@register.filter
def row_options(field: BoundField) -> SafeString:
    """One checklist row's options (a HALO question): ``<label class="opt"
    data-check-keys="…">input <kbd>key</kbd> label</label>`` each, a space after each (see
    ``keyed_options``). Its template loop was a quarter of a HALO workspace's render time
    (four rows a reply, four variables an option)."""
    return _row_options(_radios_key(field))


@lru_cache(maxsize=1024)
def _row_options(key: tuple) -> SafeString:
    return SafeString(
        "".join(
            format_html(
                '<label class="opt" data-check-keys="{}">{} <kbd>{}</kbd> {}</label> ',
                radio.keys,
                radio.tag,
                radio.kbd,
                radio.choice_label,
            )
            for radio in _radios(*key)
        )
    )


@register.filter
def check_cells(field: BoundField) -> SafeString:
    """One dialogue-audit check's options as table cells, ``<td><label class="opt"
    data-check="value" data-check-keys="…">input<span class="sr-only">label</span></label></td>``
    each (see ``keyed_options``): a checklist of a dozen rows looped over four variables an
    option."""
    return _check_cells(_radios_key(field))


@lru_cache(maxsize=1024)
def _check_cells(key: tuple) -> SafeString:
    return SafeString(
        "".join(
            format_html(
                '<td><label class="opt" data-check="{}" data-check-keys="{}">{}'
                '<span class="sr-only">{}</span></label></td>',
                radio.data["value"],
                radio.keys,
                radio.tag,
                radio.choice_label,
            )
            for radio in _radios(*key)
        )
    )


@register.filter
def proposal_cells(field: BoundField, number: int) -> SafeString:
    """Proposal ``number``'s accept/reject options as table cells, each ``<td><label
    class="opt" data-check="value" data-check-keys="…">input <kbd>key</kbd><span
    class="sr-only"> label proposal n</span></label></td>`` (see ``check_cells``)."""
    return _proposal_cells(_radios_key(field), number)


@lru_cache(maxsize=1024)
def _proposal_cells(key: tuple, number: int) -> SafeString:
    return SafeString(
        "".join(
            format_html(
                '<td><label class="opt" data-check="{}" data-check-keys="{}">{} <kbd>{}</kbd>'
                '<span class="sr-only"> {} proposal {}</span></label></td>',
                radio.data["value"],
                radio.keys,
                radio.tag,
                radio.kbd,
                radio.choice_label,
                number,
            )
            for radio in _radios(*key)
        )
    )


@register.simple_tag
def defined_options(field: BoundField, definitions: list, suggested: str) -> SafeString:
    """The failure modes as options, each with its name and definition and the suggested one
    badged: ``definitions`` the item view's (value, key, name, definition) rows, an option
    shown only when it has one. Its template was a loop over the options with a loop over
    the definitions inside (a hundred turns for ten modes)."""
    return _defined_options(_radios_key(field), tuple(map(tuple, definitions)), suggested)


@lru_cache(maxsize=1024)
def _defined_options(key: tuple, definitions: tuple, suggested: str) -> SafeString:
    return SafeString(
        "".join(
            format_html(
                '\n    <label class="opt block" data-keys="{}">{} <kbd>{}</kbd> <strong>{}</strong>'
                '{}\n      <span class="muted small definition">{}</span></label>\n    ',
                radio.keys,
                radio.tag,
                radio.kbd,
                name,
                SafeString(' <span class="badge">suggested</span>') if value == suggested else "",
                definition,
            )
            for radio in _radios(*key)
            for value, _, name, definition in definitions
            if value == radio.data["value"]
        )
    )


@lru_cache(maxsize=1024)
def _shift_options(key: tuple) -> SafeString:
    return SafeString(
        "".join(
            format_html(
                '<label class="opt" data-shift-keys="{}">{} {}</label>',
                radio.data["value"],
                radio.tag,
                radio.choice_label,
            )
            for radio in _radios(*key)
        )
    )


@lru_cache(maxsize=1024)
def _keyed_options(key: tuple, class_prefix: str) -> SafeString:
    return SafeString(
        "".join(
            format_html(
                '<label class="opt{}" data-keys="{}">{} {} <kbd>{}</kbd></label>',
                f" {class_prefix}-{radio.data['value'].lower()}" if class_prefix else "",
                radio.keys,
                radio.tag,
                radio.choice_label,
                radio.kbd,
            )
            for radio in _radios(*key)
        )
    )


@lru_cache(maxsize=1024)
def _radios(
    name: str,
    auto_id: str,
    choices: tuple,
    required: bool,
    invalid: bool,
    chosen: frozenset,
    keys: tuple[tuple[str, ...], ...],
) -> tuple[Radio, ...]:
    """The options' markup depends on nothing but these: written once per combination (a
    study's forms show a handful), then reused. Values and labels as text: every use prints
    or compares them (printing a number localises it: slower)."""
    return tuple(
        Radio(
            {"value": value},
            label,
            format_html(
                '<input type="radio" name="{}" value="{}" id="{}_{}"{}{}{}>',
                name,
                value,
                auto_id,
                index,
                SafeString(" required") if required else "",
                SafeString(' aria-invalid="true"') if invalid else "",
                SafeString(" checked") if value in chosen else "",
            ),
            " ".join(option_keys),
            option_keys[0] if option_keys else "",
        )
        for index, ((value, label), option_keys) in enumerate(zip(choices, keys, strict=True))
    )


@register.simple_tag
@cache
def flag_options() -> SafeString:
    """The flag dialog's category options (the first focused when it opens). The same on
    every item, so written once per process rather than looped over in every workspace."""
    return SafeString(
        "".join(
            format_html(
                '<label class="opt"><input type="radio" name="category" value="{}" required{}>'
                " {}</label>",
                value,
                SafeString(" autofocus") if n == 0 else "",
                label,
            )
            for n, (value, label) in enumerate(FlagCategory.choices)
        )
    )


@register.filter
def hidden(field: BoundField) -> SafeString:
    """A hidden field's input (see ``radios``: the same markup, without a template)."""
    value = field.value()
    if value is None or value == "":  # Django leaves the attribute out
        return format_html(
            '<input type="hidden" name="{}" id="{}">', field.html_name, field.auto_id
        )
    return format_html(
        '<input type="hidden" name="{}" value="{}" id="{}">', field.html_name, value, field.auto_id
    )


# A conversation this long folds its earlier messages (all but the last two) under a summary.
CHAT_FOLD_AFTER = 4
# Conversations kept rendered per process (``chat_bubbles``): more than a study's triggers
# usually are (the annotation benchmark's pairwise study has 191), at ~50 KB of markup each.
CHAT_CACHE_SIZE = 256


class _Image(NamedTuple):
    sha256: str
    alt: str


# What a conversation's markup depends on, and nothing else: the display cap (where long texts
# are cut), then each message's role, text and images. The cache key of ``_bubbles``.
_ChatKey = tuple[int, tuple[tuple[str, str, tuple[_Image, ...]], ...]]


@register.filter
def chat_bubbles(messages: list[dict]) -> SafeString:
    """A conversation's bubbles (``components/chat.html``), the last one (the trigger turn's
    user message) marked current. In Python rather than a template loop: a workspace shows up
    to twenty messages on every request, and Django's loop cost a thousand calls for them.
    Texts are model and corpus output, shown as ``core.markdown.readable`` (sanitised Markdown
    beside the escaped raw text); one longer than the display cap is cut, its rest folded
    under "show all" (the workspace's URLs must not tell which reply is which, so the rest is
    not fetched). In a conversation of more than ``CHAT_FOLD_AFTER`` messages the earlier
    ones are in an open ``<details>``: collapsible without JavaScript. A user message's
    ``images`` (rows with ``sha256`` and ``alt``) follow its text as thumbnails; the latest
    one's first image answers the zoom key (core/turn_images.py).

    Kept rendered per process, keyed by the content itself (``_ChatKey``), so never stale:
    every item at one trigger shows the same conversation to each of its annotators whatever
    the replies and their sides, and rendering it (Markdown, raw text, ~20 messages) was about
    a fifth of a web worker's CPU per answer on the annotation benchmark (bench/README.md).
    The markup depends on the content only — nothing of the item, its replies, models or
    sides — so sharing it between items keeps the workspace blind."""
    key: _ChatKey = (
        max_display_chars(),
        tuple(
            (
                m["role"],
                m["text"],
                tuple(_Image(image.sha256, image.alt) for image in m.get("images") or ()),
            )
            for m in messages
        ),
    )
    return _bubbles(key)


@lru_cache(maxsize=CHAT_CACHE_SIZE)
def _bubbles(key: _ChatKey) -> SafeString:
    messages = key[1]
    last = len(messages) - 1
    with_images = [n for n, (_, _, images) in enumerate(messages) if images]
    zoom_at = with_images[-1] if with_images else None
    bubbles = [
        f'<div class="bubble {escape(role)}{" is-current" if n == last else ""}">'
        f'<div class="who">{"User" if role == "user" else "Assistant"}</div>'
        f"{readable(text)}"
        f"{turn_images_markup(images, zoom_key=n == zoom_at)}</div>"
        for n, (role, text, images) in enumerate(messages)
    ]
    if len(bubbles) > CHAT_FOLD_AFTER:
        earlier = len(bubbles) - 2
        bubbles[:earlier] = [
            f'<details class="earlier" open><summary>Earlier messages ({earlier})</summary>'
            + "\n".join(bubbles[:earlier])
            + "</details>"
        ]
    return SafeString("\n".join(bubbles))


@register.filter
def duration(seconds) -> str:
    """Seconds as a short human duration: 45 s, 12 min, 1 h 05 min."""
    try:
        total = int(round(float(seconds or 0)))
    except (TypeError, ValueError):
        return "—"
    if total < 60:
        return f"{total} s"
    minutes = total // 60
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60:02d} min"


@register.filter
def percent(value) -> str:
    return f"{value:.0%}" if isinstance(value, int | float) else "—"


@register.filter
def answer_label(answer, kind: StudyKind) -> str:
    """An answer as its annotator saw it (``StudyKind.answer_shown``: a pairwise answer by
    screen position, never the case it maps to)."""
    return kind.answer_shown(answer)
