"""Import ``final_dialogues.jsonl`` (and optionally ``tasks.jsonl`` / ``blueprints.jsonl``).

Contract:
- The file is streamed line by line; memory does not grow with file size beyond one batch.
- Structural errors (bad JSON or encoding, missing/mistyped fields, duplicate ids, turn numbers
  not 1..n, triggers on missing turns) reject the whole file: every error is reported as
  ``line N, <json path>: <message>`` and nothing is written (one transaction, rolled back).
- Protocol findings do not reject (unless ``strict``): they are stored on the dialogue.
- Idempotent: re-importing the same file leaves the database as it was. Rows are upserted by
  their natural keys, so ids — and whatever later work points at them — survive a re-import.
  An audit status set in the Workbench is kept unless the file itself carries one.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import IO

from django.db import transaction

from benchmark.corpus.findings import StyleTraits
from benchmark.corpus.images import (
    ImageRefused,
    ImageSource,
    ImageStore,
    NoSource,
    StoredImage,
    part_bytes,
    store_part,
)
from benchmark.corpus.parsing import (
    MAX_REPORTED_ERRORS,
    CorpusError,
    CorpusImportError,
    Enrichment,
    ParsedDialogue,
    iter_json_lines,
    parse_dialogue,
)
from benchmark.corpus.schema import EXTENSION_KEY
from benchmark.corpus.writer import BatchWriter, ImportSummary
from benchmark.models import CommunicationStyle

BATCH_SIZE = 100

__all__ = [
    "BATCH_SIZE",
    "CorpusError",
    "CorpusImportError",
    "Enrichment",
    "ImportSummary",
    "StoredImage",
    "corpus_import",
]


# --- The service -----------------------------------------------------------------------------


class _Rollback(Exception):
    pass


def _store_images(
    parsed: ParsedDialogue, source: ImageSource, store: ImageStore
) -> list[CorpusError]:
    """Check and store the line's turn images, one decoded at a time, then drop their parts
    from the parsed line: what the batch keeps of them is ``parsed.images`` (metadata)."""
    extension = parsed.raw.get(EXTENSION_KEY)
    if not isinstance(extension, dict) or not extension.get("turn_images"):
        return []
    by_turn = extension["turn_images"]
    errors: list[CorpusError] = []
    for turn_text, parts in by_turn.items():
        for position, part in enumerate(parts):
            field = "data" if part.get("data") is not None else "path"
            try:
                image = store_part(part_bytes(part, source), part, store)
            except ImageRefused as exc:
                path = f"$.{EXTENSION_KEY}.turn_images.{turn_text}[{position}].{field}"
                errors.append(CorpusError(parsed.line, path, str(exc)))
                continue
            parsed.images.append(
                StoredImage(int(turn_text), position, image, part.get("alt") or "")
            )
    del extension["turn_images"]
    assert parsed.record.x_workbench is not None  # it has turn_images
    parsed.record.x_workbench.turn_images = None
    return errors


def corpus_import(
    *,
    stream: IO[bytes],
    source: str = "",
    dry_run: bool = False,
    strict: bool = False,
    enrichment: Enrichment | None = None,
    images: ImageSource | None = None,
) -> ImportSummary:
    """Check and import a dialogues file. Raises CorpusImportError (nothing written) when any
    line has a structural error, or — with ``strict`` — a protocol finding. ``images``: where
    image parts given by ``path`` are read from (a folder or a zip); image files are written
    as they pass their checks and removed again if the import fails (``ImageStore``)."""
    enrichment = enrichment or Enrichment()
    summary = ImportSummary(source=source, dry_run=dry_run)
    styles = StyleTraits.by_index(CommunicationStyle.objects.all())
    errors: list[CorpusError] = []
    error_total = 0
    seen_ids: dict[str, int] = {}
    batch: list[ParsedDialogue] = []

    def record_errors(new: Iterable[CorpusError]) -> None:
        nonlocal error_total
        for err in new:
            error_total += 1
            if len(errors) < MAX_REPORTED_ERRORS:
                errors.append(err)

    source_of_images = images or NoSource()
    store = ImageStore(write=not dry_run)
    try:
        with transaction.atomic():
            writer = BatchWriter(enrichment, summary)
            for line, raw, error in iter_json_lines(stream):
                summary.lines = line
                if error is not None:
                    record_errors([error])
                    continue
                parsed, line_errors = parse_dialogue(
                    line, raw, styles=styles, enrichment=enrichment
                )
                if parsed is not None:
                    uid = parsed.record.unique_id_eval
                    if uid in seen_ids:
                        line_errors.append(
                            CorpusError(
                                line,
                                "$.unique_id_eval",
                                f"duplicate unique_id_eval {uid!r} (first on line {seen_ids[uid]})",
                            )
                        )
                    seen_ids.setdefault(uid, line)
                    if strict:
                        line_errors += [
                            CorpusError(line, f.path, f"{f.code}: {f.message}")
                            for f in parsed.findings
                        ]
                if line_errors:
                    record_errors(line_errors)
                    continue
                assert parsed is not None  # parse_dialogue gives errors whenever it gives None
                # Once the file is known to be rejected, images are only checked, not written.
                store.write = not dry_run and not error_total
                line_errors = _store_images(parsed, source_of_images, store)
                if line_errors:
                    record_errors(line_errors)
                    continue
                summary.dialogues += 1
                summary.findings_by_code.update(f.code for f in parsed.findings)
                summary.dialogues_with_findings += bool(parsed.findings)
                if error_total:
                    # Keep checking the rest of the file so every error is reported at once;
                    # stop writing, the transaction will be rolled back. A dry run does write,
                    # inside the transaction it rolls back: that is what tells it which
                    # dialogues are new, updated or unchanged.
                    summary.triggers += len(parsed.record.trigger_points)
                    summary.triggers_by_type.update(
                        tp.evaluation_rubric.type for tp in parsed.record.trigger_points
                    )
                    summary.turns += len(parsed.record.turn_records)
                    continue
                batch.append(parsed)
                if len(batch) >= BATCH_SIZE:
                    writer.write(batch)
                    batch.clear()
            if summary.dialogues == 0 and not error_total:
                record_errors(
                    [CorpusError(max(summary.lines, 1), "$", "the file has no dialogues")]
                )
            if error_total:
                raise _Rollback
            if batch:
                writer.write(batch)
            if dry_run:
                raise _Rollback
    except _Rollback:
        store.discard()
        if error_total:
            raise CorpusImportError(errors, error_total, source) from None
    except BaseException:
        store.discard()  # the database rolled back: so do the files this import wrote
        raise
    return summary
