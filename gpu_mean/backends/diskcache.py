"""The per-user disk cache of built kernel programs (OpenCL program binaries, NVRTC cubins or PTX), so
that a second process loads what the first one compiled.

Where: ``$GPU_MEAN_CACHE_DIR`` if set (``off`` turns the cache off), else the platform's cache folder
(``$XDG_CACHE_HOME/gpu_mean`` or ``~/.cache/gpu_mean`` on Linux). The folder is created private (0700);
one owned by another user, or writable by group or others, is refused with a warning and nothing is
cached. Entries live in ``v<FORMAT>/`` (a later format never reads an older one), one file per key:

    MAGIC | key length (u32) | key (JSON text) | payload length (u64) | sha256(payload) | payload

The file name is the sha256 of the key; the key itself is stored and compared in full, so a file
renamed, copied or written for another key is never used. A truncated or corrupt entry fails its
length or checksum and is rebuilt. Writers write a temporary file in the same folder and rename it
over the entry (atomic on POSIX and Windows), so readers see a whole entry or none, and two processes
filling the cache at once both succeed (the last rename wins; both wrote the same bytes' worth).
No GPU library is imported here: the backends build the key and hand over bytes.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import struct
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

from .._version import __version__

ENV = "GPU_MEAN_CACHE_DIR"
OFF = "off"
FORMAT = 1
MAGIC = b"GMKCACHE"
# least recently used entries go first once the folder passes this size (a PoCL program binary is
# 50-300 KB, a cubin tens of KB: a few thousand programs)
MAX_BYTES = 256 << 20
# temporary files older than this were left by a writer that died; removed when pruning
STALE_TMP_S = 3600

_HEAD = struct.Struct("<I")
_BODY = struct.Struct("<Q32s")
_warned: set = set()
_lock = threading.Lock()


def default_dir() -> Path:
    """The platform's per-user cache folder for gpu_mean."""
    home = Path.home()
    if sys.platform == "win32":
        return Path(os.environ.get("LOCALAPPDATA") or home / "AppData" / "Local") / "gpu_mean" / "Cache"
    if sys.platform == "darwin":
        return home / "Library" / "Caches" / "gpu_mean"
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    # the XDG spec: a relative path in the variable is invalid and is ignored
    return (Path(xdg) if os.path.isabs(xdg) else home / ".cache") / "gpu_mean"


def location() -> Path | None:
    """The configured folder (not yet checked); None when the cache is turned off."""
    env = os.environ.get(ENV, "").strip()
    if env.lower() == OFF:
        return None
    return Path(env).expanduser().absolute() if env else default_dir()


def _warn_once(path: Path, why: str) -> None:
    with _lock:
        if path in _warned:
            return
        _warned.add(path)
    warnings.warn(f"gpu_mean: kernel cache folder {path} {why}; kernels are compiled without the cache "
                  f"(set {ENV} to another folder, or {ENV}={OFF})", RuntimeWarning, stacklevel=3)


def _refusal(path: Path) -> str | None:
    """Why ``path`` may not hold this user's cache, or None. An entry there is only as trustworthy
    as the folder: another user, or anyone who can write into it, could plant a binary we would load."""
    try:
        st = path.stat()
    except OSError as e:
        return f"cannot be read ({e.strerror or e})"
    if not path.is_dir():
        return "is not a folder"
    if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
        return f"belongs to another user (uid {st.st_uid}, not {os.geteuid()})"
    if os.name == "posix" and st.st_mode & 0o022:
        return f"is writable by users other than its owner (mode {st.st_mode & 0o777:o}; chmod 700 it)"
    return None


def open_cache() -> DiskCache | None:
    """The cache to use now (the variable is read on every call), or None: turned off, or the folder
    cannot be created or is refused (said once per folder, with a RuntimeWarning)."""
    root = location()
    if root is None:
        return None
    if not root.exists():
        try:
            root.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.chmod(root, 0o700)       # mkdir's mode passes through the umask
        except OSError as e:
            _warn_once(root, f"cannot be created ({e.strerror or e})")
            return None
    why = _refusal(root)
    if why:
        _warn_once(root, why)
        return None
    return DiskCache(root)


def describe() -> str:
    """Where compiled kernels go, in words for a notice."""
    cache = open_cache()
    if cache is not None:
        return f"kept for the next run in {cache.root}"
    return f"not kept: the kernel cache is off ({ENV}={OFF})" if location() is None else \
        "not kept: the kernel cache folder is refused (see the warning)"


def make_key(api: str, source: str, options, **identity) -> str:
    """The key of one program: the API, the full source's hash, the build options in order, what
    identifies the device and its compiler (``identity``: names, driver and platform versions), the
    gpu_mean version and the entry format. Canonical JSON, so equal inputs give equal text."""
    return json.dumps({
        "api": api, "source_sha256": hashlib.sha256(source.encode()).hexdigest(), "options": list(options),
        "identity": {k: str(v) for k, v in identity.items()}, "gpu_mean": __version__, "format": FORMAT,
    }, sort_keys=True, separators=(",", ":"))


def encode(key: str, payload: bytes) -> bytes:
    k = key.encode()
    return MAGIC + _HEAD.pack(len(k)) + k + _BODY.pack(len(payload), hashlib.sha256(payload).digest()) + payload


def decode(key: str, data: bytes) -> bytes | None:
    """The payload of an entry written for exactly ``key``, or None when the entry is foreign,
    truncated or corrupt."""
    k = key.encode()
    start = len(MAGIC) + _HEAD.size
    if len(data) < start or data[:len(MAGIC)] != MAGIC or _HEAD.unpack_from(data, len(MAGIC))[0] != len(k):
        return None
    if data[start:start + len(k)] != k:
        return None
    pos = start + len(k)
    if len(data) < pos + _BODY.size:
        return None
    n, digest = _BODY.unpack_from(data, pos)
    payload = data[pos + _BODY.size:]
    if len(payload) != n or hashlib.sha256(payload).digest() != digest:
        return None
    return payload


class DiskCache:
    def __init__(self, root: Path):
        self.root = root
        self.folder = root / f"v{FORMAT}"

    def path(self, key: str) -> Path:
        api = json.loads(key).get("api", "program")
        return self.folder / f"{api}-{hashlib.sha256(key.encode()).hexdigest()}.bin"

    def load(self, key: str) -> bytes | None:
        """The payload stored for ``key``; None when there is none or the entry fails a check."""
        path = self.path(key)
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0))
        except OSError:
            return None
        try:
            st = os.fstat(fd)
            if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
                return None
            with os.fdopen(fd, "rb", closefd=False) as f:
                data = f.read()
        except OSError:
            return None
        finally:
            os.close(fd)
        payload = decode(key, data)
        if payload is not None:
            with contextlib.suppress(OSError):
                os.utime(path)      # recently used: pruned last
        return payload

    def store(self, key: str, payload: bytes) -> bool:
        """Writes the entry atomically; False (and nothing left behind) when the disk refuses."""
        path = self.path(key)
        tmp = None
        try:
            self.folder.mkdir(mode=0o700, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".bin", dir=self.folder)   # mode 0600
            with os.fdopen(fd, "wb") as f:
                f.write(encode(key, payload))
            os.replace(tmp, path)
            tmp = None
        except OSError as e:
            _warn_once(self.root, f"cannot be written ({e.strerror or e})")
            return False
        finally:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
        self.prune()
        return True

    def prune(self, max_bytes: int = MAX_BYTES) -> None:
        """Removes the least recently used entries while the folder holds more than ``max_bytes``,
        and temporary files a dead writer left."""
        now, entries, total = time.time(), [], 0
        try:
            with os.scandir(self.folder) as it:
                for e in it:
                    try:
                        st = e.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    if e.name.startswith(".tmp-"):
                        if now - st.st_mtime > STALE_TMP_S:
                            with contextlib.suppress(OSError):
                                os.unlink(e.path)
                        continue
                    entries.append((st.st_mtime, st.st_size, e.path))
                    total += st.st_size
        except OSError:
            return
        for _, size, p in sorted(entries):
            if total <= max_bytes:
                break
            with contextlib.suppress(OSError):      # another process may have removed it first
                os.unlink(p)
            total -= size


# -- "compiling kernels": who wants to know when a program is compiled rather than loaded

_listeners: list = []


@contextlib.contextmanager
def on_compile(callback):
    """Calls ``callback(what)`` whenever a kernel program is compiled (not found in the disk cache)
    inside the block, from any thread."""
    with _lock:
        _listeners.append(callback)
    try:
        yield
    finally:
        with _lock:
            _listeners.remove(callback)


def compiling(what: str) -> None:
    """A backend is about to compile ``what`` (a cache miss, or the cache off)."""
    with _lock:
        listeners = list(_listeners)
    for cb in listeners:
        cb(what)
