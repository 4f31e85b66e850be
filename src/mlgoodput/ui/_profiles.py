"""Which profile files the web UI may serve, and reading one in pieces.

A run's profile entries come from the store, which any host of a shared store can write: a
stored name only chooses among files the UI was told it may serve. A file is served when it
lies, once `..` and symbolic links are resolved, under one of the configured profile
directories (`mlgoodput ui --profile-dir`, `$MLGOODPUT_PROFILE_DIR`, else the default
profile directory runs write to), ends like a trace file, and is at most `max_bytes`. A
profile directory may be an fsspec URL (`gs://bucket/profiles`): a file under it is read
through fsspec. Everything else is refused with one line, and a served file is read a
piece at a time.
"""

from __future__ import annotations

import os
import posixpath
import stat
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO

from mlgoodput import _env
from mlgoodput._profiler import PROFILE_SUFFIXES

#: The largest profile file served (a larger one is refused: `--max-profile-bytes`).
MAX_PROFILE_BYTES = 1 << 30
#: Bytes read and sent at a time.
PIECE_BYTES = 1 << 20


class NotServed(LookupError):
    """The file is not one the UI serves (outside the profile directories, too large, ...)."""


@dataclass(frozen=True, slots=True)
class Opened:
    """A profile file ready to send: its name, its size and its pieces (close them when done)."""

    name: str
    size: int
    pieces: Iterator[bytes]


def default_profile_dirs() -> list[str]:
    """The profile directory runs write to when given none: $MLGOODPUT_PROFILE_DIR, else the
    per-user default."""
    return [os.environ.get(_env.PROFILE_DIR) or str(_env.data_dir() / "profiles")]


def _is_url(s: str) -> bool:
    return "://" in s and not s.startswith("file://")


def _url_parts(url: str) -> tuple[str, str] | None:
    """(protocol, normalized path) of a URL, None when its path climbs out with `..`."""
    proto, _, rest = url.partition("://")
    if not proto or not rest or "\0" in rest:
        return None
    if any(seg == ".." for seg in rest.split("/")):
        return None
    return proto.lower(), posixpath.normpath("/" + rest).lstrip("/")


class ProfileFiles:
    """The directories profile files are served from, and the rule that picks a file there."""

    def __init__(self, dirs: Sequence[str] | None = None, max_bytes: int = MAX_PROFILE_BYTES) -> None:
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes <= 0:
            raise ValueError(f"max_profile_bytes must be a positive number of bytes, got {max_bytes!r}")
        given = default_profile_dirs() if dirs is None else list(dirs)
        self.local: list[str] = []
        self.urls: list[tuple[str, str]] = []
        for d in given:
            if not isinstance(d, str) or not d.strip() or "\0" in d:
                raise ValueError(f"profile_dirs must be directory paths or URLs, got {d!r}")
            if d.startswith("file://"):
                d = d[len("file://") :]
            if _is_url(d):
                parts = _url_parts(d.rstrip("/"))
                if parts is None:
                    raise ValueError(f"profile_dirs: not a usable URL: {d!r}")
                self.urls.append(parts)
            else:
                self.local.append(os.path.realpath(os.path.expanduser(d)))
        self.max_bytes = max_bytes

    def describe(self) -> str:
        shown = [*self.local, *(f"{p}://{path}" for p, path in self.urls)]
        return ", ".join(shown) or "none"

    # -- choosing --------------------------------------------------------------------------
    def candidates(self, session: Mapping[str, Any], entry: object) -> list[str]:
        """Where a stored file entry may be: a stored path or URL as it is; a bare name in the
        session's local copy (a remote run's trace waiting for its upload) or its directory."""
        if not isinstance(entry, str) or not entry or "\0" in entry:
            return []
        if entry.startswith("file://"):
            entry = entry[len("file://") :]
        if _is_url(entry) or os.path.isabs(entry):
            return [entry]
        out = []
        local = session.get("local_paths")
        for base in [*(local if isinstance(local, list) else []), session.get("path")]:
            if isinstance(base, str) and base and "\0" not in base:
                if base.startswith("file://"):
                    base = base[len("file://") :]
                out.append(f"{base.rstrip('/')}/{entry}" if _is_url(base) else os.path.join(base, entry))
        return out

    def open(self, session: Mapping[str, Any], entry: object) -> Opened:
        """The first candidate of `entry` that may be served, opened; NotServed saying why not."""
        why = "the store names no such file"
        for c in self.candidates(session, entry):
            try:
                return self._open_url(c) if _is_url(c) else self._open_local(c)
            except NotServed as e:
                why = str(e)
        raise NotServed(why)

    def _suffix_ok(self, name: str) -> None:
        if not name.endswith(PROFILE_SUFFIXES):
            raise NotServed(f"{name!r} is not a profile file")

    def _open_local(self, path: str) -> Opened:
        real = os.path.realpath(path)
        root = next((r for r in self.local if os.path.commonpath([r, real]) == r), None)
        if root is None:
            raise NotServed(f"{path!r} is outside the served profile directories ({self.describe()})")
        self._suffix_ok(os.path.basename(real))
        try:
            fd = os.open(real, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError as e:
            raise NotServed(f"{path!r} cannot be read here: {e.strerror or e}") from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise NotServed(f"{path!r} is not a regular file")
            opened = _fd_path(fd)  # what was opened, should a directory have been swapped meanwhile
            if opened is not None and os.path.commonpath([root, opened]) != root:
                raise NotServed(f"{path!r} is outside the served profile directories ({self.describe()})")
            if st.st_size > self.max_bytes:
                raise NotServed(f"{path!r} is {st.st_size:,} bytes, over the {self.max_bytes:,} bytes served")
            os.set_blocking(fd, True)
            f = os.fdopen(fd, "rb", buffering=0)
        except BaseException:
            os.close(fd)
            raise
        return Opened(os.path.basename(real), st.st_size, _Pieces(f, st.st_size))

    def _open_url(self, url: str) -> Opened:
        parts = _url_parts(url)
        if parts is None or not any(
            parts[0] == p and (parts[1] == root or parts[1].startswith(root + "/")) for p, root in self.urls
        ):
            raise NotServed(f"{url!r} is outside the served profile directories ({self.describe()})")
        self._suffix_ok(posixpath.basename(parts[1]))
        try:
            import fsspec

            fs, path = fsspec.core.url_to_fs(f"{parts[0]}://{parts[1]}")
            info = fs.info(path)
            size = int(info.get("size") or 0)
            if info.get("type") not in (None, "file"):
                raise NotServed(f"{url!r} is not a file")
            if size > self.max_bytes:
                raise NotServed(f"{url!r} is {size:,} bytes, over the {self.max_bytes:,} bytes served")
            f = fs.open(path, "rb")
        except NotServed:
            raise
        except ImportError:
            raise NotServed(f"{url!r} needs fsspec: pip install 'mlgoodput[diagnostics]'") from None
        except Exception as e:  # a backend's own errors (not found, forbidden, ...)
            raise NotServed(f"{url!r} cannot be read: {type(e).__name__}: {e}") from None
        return Opened(posixpath.basename(parts[1]), size, _Pieces(f, size))


def _fd_path(fd: int) -> str | None:
    try:
        return os.path.realpath(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        return None


class _Pieces(Iterator[bytes]):
    """`size` bytes of `f`, a piece at a time (no more: a file that grew sends what was said);
    `close()` closes the file, also when no piece was read."""

    def __init__(self, f: BinaryIO, size: int) -> None:
        self._f, self._left = f, size

    def __next__(self) -> bytes:
        if self._left <= 0:
            self.close()
            raise StopIteration
        piece = self._f.read(min(PIECE_BYTES, self._left))
        if not piece:
            self.close()
            raise OSError("the file ended early")
        self._left -= len(piece)
        return piece

    def close(self) -> None:
        self._left = 0
        self._f.close()
