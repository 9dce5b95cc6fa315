"""The wire between the judge and the sandboxed worker: both halves of the format, in one file.

Judge to worker (requests): a 4-byte length, then a pickle (:func:`request_frame`,
:func:`read_request`). The judge is trusted and the worker is not, so only that direction may
be unpickled.

Worker to judge (replies): two lengths as ten decimal digits each (JSON, raw bytes), the JSON,
then the raw bytes it points into (:func:`frame`, :func:`unframe`). The JSON carries a few tagged
one-key objects, each written by :func:`encode` and read back by :func:`message_hook`:

=========  ===================================================================
``$B``     ``[offset, length]`` of bytes sent raw after the JSON
``$t``     a tuple
``$s``     a set (read back as a frozenset)
``$d``     a dict whose keys JSON cannot hold, as ``[key, value]`` pairs
``$o``     one of the judge's own objects that was handed to the worker
``$r``     ``[type name, repr]`` of an object that cannot cross
``$f``     a float JSON cannot hold (``nan``, ``inf``, ``-inf``)
``$op``    one recorded file operation, its fields in :data:`OP_FIELDS` order
=========  ===================================================================

Nothing the worker sends is unpickled or evaluated. Bytes travel raw, not as base64 inside the
JSON: a level's generated conversations write tens of megabytes, and encoding them was most of
a grading run.
"""

from __future__ import annotations

import json
import pickle
import re
import struct
from typing import Any, Callable, Optional

from grader.engine.recorder import FS_KINDS, Op

MAX_MESSAGE = 256 * 1024 * 1024
MAX_FILE = 64 * 1024 * 1024  # the box's cap on one file (grader.grading.sandbox.Limits.file_size)
# The two lengths in front of every reply, as ten decimal digits each: ASCII, so a reply of plain JSON
# is printed by the kernel tracer as it is (one character a byte) rather than wholly in hex (four).
HEADER = 20

# The worker's exit status when a fresh call's child killed the fork server, its parent (grader.engine.fresh).
FORK_SERVER_KILLED = 70


# -- things the judge hands over that cannot cross as data ------------------------------------------

class Callback:
    """A callable that lives in the judge (the scripted model, a tool); calling it asks the judge."""

    def __init__(self, ident: int, name: str = "callback"):
        self.ident = ident
        self.name = name


class Stand:
    """An object that lives in the judge (a live API client, a lock): it travels by reference only."""

    def __init__(self, ident: int, type_name: str, text: str):
        self.ident = ident
        self.type_name = type_name
        self.text = text


class Blob:
    """Bytes in an encoded message: sent after the JSON, raw (see :func:`send`)."""

    __slots__ = ("data",)

    def __init__(self, data: bytes):
        self.data = data


OP_FIELDS = ("index", "kind", "api", "path", "dest", "handle", "offset", "data", "size", "flags", "is_dir",
             "payload", "note")


def encode(value: Any, depth: int = 0) -> Any:
    """Plain data for JSON; anything else becomes a description the judge cannot mistake for data."""
    # Fast paths first: a loop's messages are thousands of exact str, list and dict values.
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if depth <= 200:
        if kind is list:
            return [encode(v, depth + 1) for v in value]
        if kind is dict:
            for key in value:
                if type(key) is not str or key.startswith("$"):
                    break
            else:
                return {k: encode(v, depth + 1) for k, v in value.items()}
    return _encode_other(value, depth)


def _encode_other(value: Any, depth: int) -> Any:
    if depth > 200:
        return {"$r": ["object", "(nested too deeply to send)"]}
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else {"$f": repr(value)}
    ident = getattr(value, "_crashcourse_ident", None)
    if isinstance(ident, int):
        return {"$o": ident}
    if isinstance(value, (bytes, bytearray, memoryview)):
        return Blob(bytes(value))
    if isinstance(value, list):
        return [encode(v, depth + 1) for v in value]
    if isinstance(value, tuple):
        return {"$t": [encode(v, depth + 1) for v in value]}
    if isinstance(value, (set, frozenset)):
        return {"$s": [encode(v, depth + 1) for v in value]}
    if isinstance(value, dict):
        if all(isinstance(k, str) and not k.startswith("$") for k in value):
            return {k: encode(v, depth + 1) for k, v in value.items()}
        return {"$d": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]}
    if isinstance(value, Op):
        # Field by field in OP_FIELDS order, without the general walk: a run sends hundreds of these.
        return {"$op": [value.index, value.kind, value.api, value.path, value.dest, value.handle, value.offset,
                        Blob(bytes(value.data)), value.size, {"$s": sorted(value.flags)}, bool(value.is_dir),
                        encode(value.payload, depth + 1), encode(value.note, depth + 1)]}
    try:
        text = repr(value)[:200]
    except Exception:  # noqa: BLE001 - a student's __repr__ may raise anything
        text = "(an object whose repr failed)"
    return {"$r": [type(value).__name__, text]}



# -- worker to judge: JSON with tags, then raw bytes -------------------------------------------------

# The flag on a write the worker sent with its size but not its bytes: when the judge takes a kernel
# trace, the bytes of writes in the watched folders come from there (grader.grading.kernel_trace);
# sent on the pipe as well, they would cross it, and be printed by the tracer, a second time.
ELIDED = "bytes-from-kernel"
# Calls that copy bytes from file to file inside the kernel: strace prints none of them, so a copy's
# bytes travel on the pipe (grader.grading.worker), and the judge takes them from there.
COPIES = ("os.sendfile", "os.copy_file_range")

_TAG_KEY = re.compile(rb'\{"\$(?:B|t|s|d|o|r|f|op)":')


def _refuse(value: Any) -> Any:
    raise TypeError(type(value).__name__)


def plain_json(value: Any) -> Optional[bytes]:
    """``value`` as the JSON an HTTP API would receive, or None if it is not plain JSON data.

    The fast road for what a loop hands the model (the whole conversation, on every call): one
    pass of the C encoder instead of :func:`encode`'s walk. Tuples become lists and number keys
    strings, as they would on the wire to the real API. Anything else (bytes, an object from the
    judge, NaN, a dict the judge would mistake for one of its tags) takes the careful road.
    """
    try:
        text = json.dumps(value, separators=(",", ":"), allow_nan=False, default=_refuse).encode("utf-8")
    except (TypeError, ValueError, RecursionError):
        return None
    return None if _TAG_KEY.search(text) else text


def frame(message: dict) -> bytes:
    """One message as it goes on the pipe: two lengths, the JSON, then the raw bytes it points into."""
    blobs: list = []
    offset = 0

    def place(value: Any) -> dict:
        nonlocal offset
        if not isinstance(value, Blob):
            raise TypeError(f"cannot send {type(value).__name__}")
        start = offset
        blobs.append(value.data)
        offset += len(value.data)
        return {"$B": [start, len(value.data)]}

    body = json.dumps(message, separators=(",", ":"), allow_nan=False, default=place).encode("utf-8")
    return b"".join([b"%010d%010d" % (len(body), offset), body, *blobs])


def reply_size(header: bytes) -> int:
    """The length of a reply after its :data:`HEADER`, read from that header."""
    head, blob_size = _lengths(header)
    return head + blob_size


def _lengths(header: bytes) -> tuple[int, int]:
    """The two lengths of a :data:`HEADER`; a header that is not twenty digits reads as too large."""
    digits = header[:HEADER]
    if len(digits) != HEADER or not digits.isdigit():
        return MAX_MESSAGE + 1, 0
    return int(digits[:10]), int(digits[10:])


class RemoteObject:
    """Something the worker returned that is not plain data (shown by its type and repr only)."""

    def __init__(self, type_name: str, text: str):
        self.type_name, self.text = type_name, text

    def __repr__(self) -> str:
        return self.text

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, RemoteObject) and (self.type_name, self.text) == (other.type_name, other.text)

    __hash__ = object.__hash__


_MISSING_OBJECT = ("object", "(an object the grader does not know)")


def message_hook(body: bytes, start: int, objects: Optional[dict] = None):
    """A ``json.loads`` object hook that decodes the worker's tagged forms in the same pass.

    ``{"$B": [offset, length]}`` is bytes sent raw after the JSON (``body[start:]``); ``$t`` a
    tuple, ``$s`` a set, ``$d`` a dict with keys JSON cannot hold, ``$o`` one of the judge's own
    ``objects`` handed to the call, ``$r`` a stand-in for an object that cannot cross, ``$f`` a
    float JSON cannot hold, ``$op`` one file operation. JSON decodes inner objects first, so each
    tag sees its contents already decoded. Anything else stays a plain dict.
    """
    return _Hook(body, start, {} if objects is None else objects)


class _Hook:
    """The object hook of :func:`message_hook`: each tag decoded by its own method (:data:`_TAGS`)."""

    def __init__(self, body: bytes, start: int, objects: dict):
        self.body, self.start, self.end, self.objects = body, start, len(body), objects
        # What the references may add up to: the raw bytes sent, each once (frame() places every Blob
        # of its own). A reply that points at the same bytes many times would make the judge copy them
        # each time, and a few MiB could grow it by gigabytes.
        self.left = self.end - start

    def __call__(self, obj: dict) -> Any:
        if len(obj) != 1:
            return obj
        (tag, inner), = obj.items()
        decode = _TAGS.get(tag)
        if decode is None:
            return obj
        value = decode(self, inner)
        return obj if value is _PLAIN else value

    def blob(self, inner: Any) -> bytes:
        if isinstance(inner, list) and len(inner) == 2 and all(type(n) is int and n >= 0 for n in inner) \
                and self.start + inner[0] + inner[1] <= self.end:
            self.left -= inner[1]
            if self.left < 0:
                raise ValueError("references to more bytes than the message holds")
            return self.body[self.start + inner[0]:self.start + inner[0] + inner[1]]
        raise ValueError("a reference to bytes outside the message")

    def tuple_(self, inner: Any) -> Any:
        return tuple(inner) if isinstance(inner, list) else _PLAIN

    def set_(self, inner: Any) -> Any:
        if not isinstance(inner, list):
            return _PLAIN
        try:
            return frozenset(inner)
        except TypeError:
            return RemoteObject("set", "(a set of unhashable values)")

    def dict_(self, inner: Any) -> Any:
        if not isinstance(inner, list):
            return _PLAIN
        out = {}
        for pair in inner:
            if isinstance(pair, list) and len(pair) == 2:
                try:
                    out[pair[0]] = pair[1]
                except TypeError:
                    out[repr(pair[0])] = pair[1]
        return out

    def own_object(self, inner: Any) -> Any:
        if type(inner) is not int:
            return _PLAIN
        return self.objects[inner] if inner in self.objects else RemoteObject(*_MISSING_OBJECT)

    def stand_in(self, inner: Any) -> Any:
        return RemoteObject(str(inner[0]), str(inner[1])) if isinstance(inner, list) and len(inner) == 2 else _PLAIN

    def float_(self, inner: Any) -> Any:
        return float(inner) if inner in ("nan", "inf", "-inf") else _PLAIN

    def op(self, inner: Any) -> Any:
        if isinstance(inner, list) and len(inner) == len(OP_FIELDS):
            return decode_op(dict(zip(OP_FIELDS, inner)))
        return _PLAIN


# A tagged form whose contents are not what its tag says: it stays the plain dict it was.
_PLAIN = object()
_TAGS = {"$B": _Hook.blob, "$t": _Hook.tuple_, "$s": _Hook.set_, "$d": _Hook.dict_, "$o": _Hook.own_object,
         "$r": _Hook.stand_in, "$f": _Hook.float_, "$op": _Hook.op}


def decoded_cost(body: bytes) -> int:
    """An upper bound, in bytes, on what decoding the JSON ``body`` makes the judge hold: each object,
    list and value costs tens of bytes in Python however short its JSON (``[[],[],...]`` is three
    bytes a list, and a list costs 56 and a pointer). Counted with C-speed ``bytes.count``."""
    return len(body) * 4 + body.count(b"{") * 240 + body.count(b"[") * 64 + body.count(b",") * 64


# What decoding one reply may cost the judge (see decoded_cost): a correct loop's largest reply (level
# 6's returned state) is under 300 KB of JSON; this is a thousand times that.
MAX_DECODED = 256 * 1024 * 1024


def unframe(data: bytes, objects: Optional[dict] = None) -> Any:
    """One whole reply from the worker (see :func:`frame`), decoded; None if unreadable, or if decoding it
    would cost the judge more than :data:`MAX_DECODED` (a reply is made in a box the judge does not trust)."""
    if len(data) < HEADER:
        return None
    head, blob_size = _lengths(data)
    if len(data) != HEADER + head + blob_size:
        return None
    body = data[HEADER:HEADER + head]
    if decoded_cost(body) > MAX_DECODED:
        return None
    try:
        return json.loads(body, object_hook=message_hook(data, HEADER + head, objects))
    except (ValueError, RecursionError):
        return None


def decode_op(values: dict) -> Optional[Op]:
    """One file operation the worker recorded, checked field by field (None if it is not one)."""
    kind = values.get("kind")
    if kind not in FS_KINDS and kind != "flush":
        return None  # loop events are recorded by the judge alone

    def text(v: Any) -> Optional[str]:
        return v if isinstance(v, str) else None

    def number(v: Any, default: Optional[int] = 0) -> Optional[int]:
        return v if isinstance(v, int) and not isinstance(v, bool) else default

    flags = values.get("flags")
    # A box's files are capped (RLIMIT_FSIZE): no offset or size past that cap is one the kernel let
    # through, and replaying one would make the judge hold that many bytes for a file.
    for name in ("offset", "size"):
        value = values.get(name)
        if isinstance(value, int) and not 0 <= value <= MAX_FILE:
            raise ValueError(f"a file operation's {name} out of bounds")
    data = values.get("data")
    if isinstance(data, bytes) and isinstance(values.get("offset"), int) and values["offset"] + len(data) > MAX_FILE:
        raise ValueError("a write past the end a file may reach")
    return Op(0, kind, api=text(values.get("api")) or "", path=text(values.get("path")), dest=text(values.get("dest")),
              handle=number(values.get("handle"), None), offset=number(values.get("offset"), None),
              data=values.get("data") if isinstance(values.get("data"), bytes) else b"",
              size=number(values.get("size")) or 0,
              flags=frozenset(f for f in flags if isinstance(f, str)) if isinstance(flags, frozenset) else frozenset(),
              is_dir=values.get("is_dir") is True, payload=None, note="")




# -- judge to worker: a pickle (only the trusted side's messages are ever unpickled) ----------------

def request_frame(message: dict) -> bytes:
    """One request as the judge writes it: a 4-byte length, then the pickle."""
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return struct.pack(">I", len(data)) + data


def read_request(read_exact: Callable[[int], bytes]) -> Any:
    """The next request, read with ``read_exact(n)`` (which raises EOFError when the pipe closes)."""
    (size,) = struct.unpack(">I", read_exact(4))
    if size > MAX_MESSAGE:
        raise EOFError("message too large")
    return pickle.loads(read_exact(size))
