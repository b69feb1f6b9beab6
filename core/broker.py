"""The embedded default's message broker: kombu's filesystem transport, made safe to share.

kombu's own transport writes a message in place (open, lock, write) while consumers take any
file with the queue's name without looking at the lock, so a consumer can take a message that
is still half written; decoding it raised ``JSONDecodeError`` inside the worker's consumer loop,
which Celery treats as an unrecoverable error and exits. Two changes, each enough alone:

- **Atomic writes.** A message is written under a name no consumer matches (a leading dot and a
  ``.part`` suffix) and renamed to its final name once complete; a rename within one folder is
  atomic, so a consumer sees a whole message or none.
- **Broken files are moved aside.** A file that still cannot be decoded (written by an older
  kombu, cut short by a full disk, edited by hand) goes to the ``broken_folder`` transport
  option's folder with an error in the log, and the consumer goes on with the next message:
  one bad file never stops the worker, and nothing is deleted unseen.

Selected in settings by ``CELERY_BROKER_TRANSPORT = "core.broker:Transport"`` with the
``filesystem://`` URL; every process (web, worker, beat) must use it for writes to be atomic.
"""

import contextlib
import logging
import os
import uuid
from time import monotonic

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import bytes_to_str, str_to_bytes
from kombu.utils.json import dumps, loads

logger = logging.getLogger(__name__)

_PART_SUFFIX = ".part"


def _queue_of(filename: str) -> str:
    # kombu's naming: "<ms>_<uuid>.<queue>.msg"; everything after the first dot names the queue.
    return filename.partition(".")[2]


class Channel(filesystem.Channel):
    @property
    def broken_folder(self) -> str:
        folder = self.transport_options.get("broken_folder") or os.path.join(
            os.path.dirname(os.path.abspath(self.data_folder_in)), "broken"
        )
        os.makedirs(folder, exist_ok=True)
        return folder

    # kombu's two bases name the message differently; callers pass it by position.
    def _put(self, queue, payload, **kwargs):  # type: ignore[override]
        name = f"{round(monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        # Starts with a dot, so "everything after the first dot" is not "<queue>.msg": no
        # consumer (ours or kombu's, nor _size or _purge) ever matches a partial file.
        partial = os.path.join(self.data_folder_out, f".{name}{_PART_SUFFIX}")
        try:
            with open(partial, "wb") as f:
                f.write(str_to_bytes(dumps(payload)))
            os.replace(partial, final)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.remove(partial)
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc

    def _get(self, queue, timeout=None):
        wanted = f"{queue}.msg"
        # Taken files are read from the processed folder: the rename into it is the claim (one
        # consumer wins it), and it lies beside the queue, so the rename stays atomic.
        taken_folder = self.processed_folder
        os.makedirs(taken_folder, exist_ok=True)
        for filename in sorted(os.listdir(self.data_folder_in)):
            if _queue_of(filename) != wanted:
                continue
            taken = os.path.join(taken_folder, filename)
            try:
                os.replace(os.path.join(self.data_folder_in, filename), taken)
            except OSError:
                continue  # another consumer took it first
            try:
                with open(taken, "rb") as f:
                    payload = f.read()
            except OSError as exc:
                raise ChannelError(f"Cannot read file {taken!r} from queue.") from exc
            try:
                message = loads(bytes_to_str(payload))
                if not isinstance(message, dict):
                    raise ValueError(f"a message is a JSON object, not {type(message).__name__}")
            except (ValueError, UnicodeDecodeError) as exc:
                self._set_aside(taken, filename, len(payload), exc)
                continue
            if not self.store_processed:
                os.remove(taken)
            return message
        raise filesystem.Empty()

    def _set_aside(self, taken: str, filename: str, size: int, error: Exception) -> None:
        aside = os.path.join(self.broken_folder, filename)
        os.replace(taken, aside)
        logger.error(
            "Broker: message file %s (%d bytes) could not be decoded (%s); moved to %s and "
            "skipped. The worker goes on.",
            filename,
            size,
            error,
            aside,
        )


class Transport(filesystem.Transport):
    Channel = Channel
