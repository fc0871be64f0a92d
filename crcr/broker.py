"""The embedded broker used when REDIS_URL is unset: kombu's filesystem transport, with one fix.

Kombu writes a message file in place, and a consumer in another process may move and read it
before the write finishes, reading an empty file and crashing the worker. Writing to a hidden
temporary name and renaming it into the queue folder makes each message appear whole (rename is
atomic on one filesystem). Registered as the `crcrfs://` transport."""

import os
import uuid
from time import monotonic

from kombu.transport import TRANSPORT_ALIASES, filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps


class Channel(filesystem.Channel):
    def _put(self, queue, payload, **kwargs):
        name = f"{int(round(monotonic() * 1000))}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        partial = os.path.join(self.data_folder_out, f".{name}.part")
        try:
            with open(partial, "wb") as handle:
                handle.write(str_to_bytes(dumps(payload)))
            os.replace(partial, final)
        except OSError as exc:
            raise filesystem.ChannelError(f"Cannot add file {final!r} to directory") from exc


class Transport(filesystem.Transport):
    Channel = Channel

    # A folder on this machine has no host: without this kombu falls back to "localhost" and
    # warns "No hostname was supplied" on every connection.
    default_connection_params = {}


TRANSPORT_ALIASES["crcrfs"] = "crcr.broker:Transport"
