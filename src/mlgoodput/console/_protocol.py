"""The console wire format: versioned msgpack messages (msgspec) in length-prefixed frames.

Every frame is a 4-byte big-endian length and one message. Messages are tagged structs
decoded against a fixed schema, so a peer can only ever produce these plain values:
nothing on the wire is pickled or executed. A frame longer than `MAX_FRAME_BYTES` is
refused before it is read.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from typing import Annotated, Any

try:
    import msgspec
    from msgspec import Meta
except ImportError:  # pragma: no cover - depends on the install
    raise ImportError("mlgoodput.console needs msgspec: pip install 'mlgoodput[console]'") from None

#: Bumped when a message changes incompatibly; both sides refuse another version.
VERSION = 1
#: The largest frame either side accepts (a log message is cut well below this).
MAX_FRAME_BYTES = 8 * 1024 * 1024
#: The longest log message text sent; longer ones are cut and marked.
MAX_MESSAGE_CHARS = 64 * 1024
HEADER = struct.Struct(">I")
#: The largest frame a server reads before the client has authenticated (its hello).
MAX_HELLO_BYTES = 4096

# Value ranges the schema enforces (NaN and infinities fail them too), so nothing a peer
# sends can poison the store or the screen.
Time = Annotated[float, Meta(ge=0.0, le=1e11)]
Count = Annotated[float, Meta(ge=-1e15, le=1e15)]
Int32 = Annotated[int, Meta(ge=0, le=2**31 - 1)]
Int62 = Annotated[int, Meta(ge=0, le=2**62)]
Id = Annotated[int, Meta(ge=0, le=2**63 - 1)]


class FrameError(ValueError):
    """A frame that breaks the protocol: too large, undecodable, or out of place."""


# -- records: what a client reports -------------------------------------------------------
class LogRec(msgspec.Struct, tag=0, array_like=True, frozen=True):
    """One log record, already formatted on the client. `ansi`: a rich rendering as ANSI text."""

    time: Time
    level: Int32
    logger: str
    msg: str
    file: str
    line: Int32
    ansi: str | None = None
    exc: str | None = None


class ProgressRec(msgspec.Struct, tag=1, array_like=True, frozen=True):
    """A bar's state: `completed` (absolute) or `delta` (distributed bars add them up)."""

    time: Time
    bar: str
    desc: str
    total: Count | None
    completed: Count | None
    delta: Count
    done: bool
    distributed: bool


class UsageRec(msgspec.Struct, tag=2, array_like=True, frozen=True):
    """One usage sample of one process: CPU percent, resident bytes, optional GPU figures."""

    time: Time
    cpu: Annotated[float, Meta(ge=0.0, le=1e6)]
    rss: Int62
    gpu_util: Annotated[float, Meta(ge=0.0, le=1e6)] | None = None
    gpu_mem: Int62 | None = None


class MarkRec(msgspec.Struct, tag=3, array_like=True, frozen=True):
    """A usage checkpoint marker (`Usage.checkpoint(name, step)`)."""

    time: Time
    name: str
    step: Int62 | None = None


Record = LogRec | ProgressRec | UsageRec | MarkRec


# -- client -> server ------------------------------------------------------------------------
class Hello(msgspec.Struct, tag="hello", array_like=True, frozen=True):
    """The client's answer to a Challenge: who it is, and the HMAC of the nonce when asked."""

    version: int
    client: Id
    pid: Int62
    hostname: str
    argv: str
    mac: bytes


class Batch(msgspec.Struct, tag="batch", array_like=True, frozen=True):
    """Records numbered `first_seq`, `first_seq + 1`, ... by the client."""

    first_seq: Int62
    records: list[Record]


class Ping(msgspec.Struct, tag="ping", array_like=True, frozen=True):
    """A heartbeat; the server answers with an Ack."""

    time: Time


class Bye(msgspec.Struct, tag="bye", array_like=True, frozen=True):
    """A clean goodbye: the process is leaving on purpose."""


ClientMsg = Hello | Batch | Ping | Bye


# -- server -> client ------------------------------------------------------------------------
class Challenge(msgspec.Struct, tag="challenge", array_like=True, frozen=True):
    """The first frame of every connection: the version, a nonce, and whether a token is needed."""

    version: int
    nonce: bytes
    auth: bool


class Welcome(msgspec.Struct, tag="welcome", array_like=True, frozen=True):
    """The handshake succeeded: the client's short process number and the server's job."""

    process: int
    job: str
    next_seq: int


class Refuse(msgspec.Struct, tag="refuse", array_like=True, frozen=True):
    """The server will not talk to this client, and why; it closes the connection."""

    reason: str


class Ack(msgspec.Struct, tag="ack", array_like=True, frozen=True):
    """Every record numbered below `next_seq` is stored; the client may forget it."""

    next_seq: int


ServerMsg = Challenge | Welcome | Refuse | Ack

_encoder = msgspec.msgpack.Encoder()
client_decoder: msgspec.msgpack.Decoder[Any] = msgspec.msgpack.Decoder(ClientMsg)
server_decoder: msgspec.msgpack.Decoder[Any] = msgspec.msgpack.Decoder(ServerMsg)


def frame(msg: Any) -> bytes:
    """One message as a frame: its length, then its msgpack bytes."""
    body = _encoder.encode(msg)
    if len(body) > MAX_FRAME_BYTES:
        raise FrameError(f"frame of {len(body)} bytes exceeds the maximum of {MAX_FRAME_BYTES}")
    return HEADER.pack(len(body)) + body


def frame_length(header: bytes, maximum: int = MAX_FRAME_BYTES) -> int:
    """The body length announced by a header, refusing one above `maximum`."""
    (n,) = HEADER.unpack(header)
    if n > maximum:
        raise FrameError(f"frame of {n} bytes announced, maximum is {maximum}")
    return int(n)


def decode_client(body: bytes) -> Any:
    """A client message, schema-checked; FrameError for anything else."""
    try:
        return client_decoder.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError) as e:
        raise FrameError(f"malformed client frame: {e}") from None


def decode_server(body: bytes) -> Any:
    try:
        return server_decoder.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError) as e:
        raise FrameError(f"malformed server frame: {e}") from None


def mac(token: str, nonce: bytes) -> bytes:
    """The proof of the token for one challenge: HMAC-SHA256 of the nonce."""
    return hmac.new(token.encode(), b"mlgoodput-console\0" + nonce, hashlib.sha256).digest()


def mac_ok(token: str, nonce: bytes, got: bytes) -> bool:
    return hmac.compare_digest(mac(token, nonce), got)
