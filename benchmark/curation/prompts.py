"""The product's prompts: versioned text files under ``benchmark/prompts/``.

A prompt is ``<name>.v<N>.txt``; ``load_prompt(name)`` returns the highest N. Changing what an
agent is told means adding a new version file, never editing an old one, so a dialogue's
``prompt_versions`` always names the exact text that produced it.

Placeholders are ``{identifier}`` (lower-case letters, digits, underscores). Any other brace is
literal text, so prompts can show JSON examples (``{"verdict": ...}``) without escaping.
Rendering is strict both ways: a placeholder without a value and a value without a placeholder
are errors. The second rule matters for isolation: a caller cannot hand a prompt a field the
prompt was not written to show. Substitution is a single pass, so a value that itself contains
``{something}`` (user text often does) is inserted verbatim, never expanded.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

PROMPTS_DIR = Path(__file__).resolve().parent.parent / "prompts"

_FILE_NAME = re.compile(r"^(?P<name>[a-z_]+)\.v(?P<number>[0-9]+)\.txt$")
_PLACEHOLDER = re.compile(r"\{([a-z_][a-z0-9_]*)\}")


class PromptError(Exception):
    """A prompt file is missing, or was rendered with the wrong fields."""


@dataclass(frozen=True)
class Prompt:
    name: str
    version: str
    text: str

    @property
    def placeholders(self) -> frozenset[str]:
        return frozenset(_PLACEHOLDER.findall(self.text))

    def render(self, **fields: object) -> str:
        """The text with every placeholder replaced by ``str(value)``."""
        missing = self.placeholders - fields.keys()
        unexpected = fields.keys() - self.placeholders
        if missing or unexpected:
            raise PromptError(
                f"prompt {self.name}.{self.version}: "
                + "; ".join(
                    part
                    for part in (
                        f"no value for {sorted(missing)}" if missing else "",
                        f"no placeholder for {sorted(unexpected)}" if unexpected else "",
                    )
                    if part
                )
            )
        return _PLACEHOLDER.sub(lambda match: str(fields[match.group(1)]), self.text)


@functools.cache
def load_prompt(name: str) -> Prompt:
    """The latest version of prompt ``name``. Cached: prompt files change only with a deploy."""
    versions: dict[int, Path] = {}
    for path in PROMPTS_DIR.glob(f"{name}.v*.txt"):
        match = _FILE_NAME.match(path.name)
        if match and match["name"] == name:
            versions[int(match["number"])] = path
    if not versions:
        raise PromptError(f"no prompt file {name}.v<N>.txt in {PROMPTS_DIR}")
    number = max(versions)
    return Prompt(name, f"v{number}", versions[number].read_text(encoding="utf-8").rstrip())
