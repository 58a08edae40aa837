"""The only stage that writes into the site folder, and it switches sites atomically.

Layout, for ``--out /srv/www/reports``::

    /srv/www/reports            -> .reports.builds/000007-3f2a9c1b0d4e   (relative symlink)
    /srv/www/.reports.builds/   000005-..., 000006-..., 000007-...        (the last ``keep`` builds)

A build is written completely into a staging folder inside ``.reports.builds``, renamed to its
final name, and only then made live by pointing ``reports`` at it: a temporary symlink is
created and renamed over ``reports`` (``rename(2)`` is atomic). nginx resolves the symlink on
every request (``disable_symlinks off`` is its default), so it serves either the whole old site
or the whole new one, never a mix; a failed or killed build leaves the live site untouched and
its staging folder is removed by the next build. The symlink target is relative, so the parent
folder can be moved or mounted elsewhere.

An ``out`` that is still a real directory (made by an older sitegen) is migrated: it becomes the
oldest build, and the symlink takes its place (with ``renameat2(RENAME_EXCHANGE)`` where the
kernel has it, so even that switch has no gap).

Every path is checked to stay inside the site; ``.gz`` twins are written beside large text files
for nginx's ``gzip_static`` -- deterministically (gzip mtime 0) and with the same mtime as the
original, so ``Last-Modified``/``ETag`` agree whichever body nginx picks.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import logging
import os
import re
import secrets
import shutil
import stat
import zlib
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator

from sitegen.errors import SitegenError, UsageError
from sitegen.fileio import named
from sitegen.publish.live import MANIFEST, build_number, builds_dir, checked_relpath, folders, list_builds, live_build, read_manifest

log = logging.getLogger(__name__)
GZIP_SUFFIXES = (".html", ".js", ".css", ".json", ".svg")  # not .csv: downloads, fetched rarely
GZIP_MIN_BYTES = 1024
STAGING_NAME = re.compile(r"^\.staging-(\d+)-[0-9a-f]+$")
TRASH_NAME = re.compile(r"^\.trash-(\d+)-.+$")


NO_TWIN_NAMES = ("scalars.js",)  # a run's full scalars: loaded only when its CSV is asked for


def needs_twin(rel: str, data: bytes | bytearray) -> bool:
    return _twin_wanted(rel, len(data))


def _twin_wanted(rel: str, size: int) -> bool:
    return rel.endswith(GZIP_SUFFIXES) and size >= GZIP_MIN_BYTES and not rel.endswith(NO_TWIN_NAMES)


GZIP_FAST_FROM = 64 * 1024  # zlib only: larger files (page data: mostly base64) get level 1

_isal: Any
try:  # ISA-L's deflate: several times faster than zlib on page data, and as small
    from isal import isal_zlib as _isal
except ImportError:  # pragma: no cover - isal is a dependency; zlib is the fallback
    _isal = None


def gzip_twin(data: bytes | bytearray) -> bytes:
    """The deterministic ``.gz`` twin (gzip header time 0): ISA-L level 2 where installed, else
    zlib level 6, or level 1 for large files (mostly base64 page data, which level 6 hardly
    shrinks further)."""
    if _isal is not None:
        return _isal.compress(data, 2, wbits=31)
    return zlib.compress(data, 1 if len(data) >= GZIP_FAST_FROM else 6, wbits=31)


def gzip_stream() -> Any:
    """A compressor for a ``.gz`` twin written piece by piece (:meth:`Writer.write_pieces`):
    deterministic for the same pieces (gzip header time 0), as :func:`gzip_twin` is."""
    if _isal is not None:
        return _isal.compressobj(2, _isal.DEFLATED, 31)
    return zlib.compressobj(1, zlib.DEFLATED, 31)


def _previous_hashes(previous: Path | None) -> dict[str, tuple[str, int]]:
    """``{path: (sha256, size)}`` of a previous build's pages and assets, from its manifest (the
    build's last question to it: the parsed manifest is let go)."""
    if previous is None:
        return {}
    try:
        data = read_manifest(previous, last=True)
        return {rel: (e["sha256"], int(e.get("size", -1))) for rel, e in data["files"].items() if isinstance(e, dict) and "sha256" in e}
    except (OSError, ValueError, TypeError, AttributeError):
        return {}


#: every published file and folder: readable by the web server's user whatever the build's umask
#: (a umask of 077 would make them the builder's alone), writable by the builder only
FILE_MODE, DIR_MODE = 0o644, 0o755


def _write_file(path: str, pieces: Iterable[bytes | bytearray]) -> None:
    """Write ``pieces`` into the new file ``path``, readable by all (see :data:`FILE_MODE`)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)  # (open's mode is masked by the umask)
        for piece in pieces:
            view = memoryview(piece)
            while view:
                view = view[os.write(fd, view) :]
    except OSError as exc:  # (a full disk: the one line printed names the file)
        raise named(exc, path) from None
    finally:
        os.close(fd)


def _write_pieces(path: str, pieces: Iterable[bytes]) -> tuple[str, int]:
    """Write ``pieces`` into the new file ``path``; its SHA-256 and size."""
    h = hashlib.sha256()
    size = 0

    def hashed() -> Iterator[bytes]:
        nonlocal size
        for piece in pieces:
            h.update(piece)
            size += len(piece)
            yield piece

    _write_file(path, hashed())
    return h.hexdigest(), size


def _make_dirs(folder: str) -> None:
    """``mkdir -p`` with :data:`DIR_MODE` for every folder it makes, whatever the umask."""
    if os.path.isdir(folder):
        return
    parent = os.path.dirname(folder)
    if parent and parent != folder:
        _make_dirs(parent)
    try:
        os.mkdir(folder, DIR_MODE)
    except FileExistsError:
        return
    os.chmod(folder, DIR_MODE)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:  # some filesystems refuse fsync on directories
        pass
    finally:
        os.close(fd)


def _looks_like_site(path: Path) -> bool:
    """An old sitegen site (or an empty folder): safe to take over."""
    try:
        names = {p.name for p in path.iterdir()}
    except OSError:
        return False
    return not names or ("index.html" in names and ("assets" in names or "manifest.json" in names))


def _check_out(out: Path) -> None:
    if out.is_symlink():
        return
    if out.exists() and not out.is_dir():
        raise UsageError(f"{out}: exists and is not a folder; refusing to replace it")
    if out.is_dir() and not _looks_like_site(out):
        raise UsageError(f"{out}: is a folder that was not made by sitegen (no index.html and assets/); refusing to replace it")


@contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """One publisher at a time switches and prunes (a concurrent one waits)."""
    fd = os.open(folder / ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _rename_exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths (Linux ``renameat2(RENAME_EXCHANGE)``); False when unsupported."""
    import ctypes.util  # here: needed only to migrate an old site folder, and it imports subprocess

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def _switch(out: Path, target: Path, durable: bool = False) -> None:
    """Point ``out`` at ``target`` with one atomic rename (migrating a real directory first);
    ``durable``: the switch itself is on storage when this returns."""
    link = out.parent / f".{out.name}.link-{os.getpid()}"
    if link.is_symlink() or link.exists():
        link.unlink()
    os.symlink(os.path.relpath(target, out.parent), link)
    if out.is_symlink() or not out.exists():
        os.replace(link, out)
    else:
        legacy = builds_dir(out) / "000000-legacy"
        n = 1
        while legacy.exists():
            n += 1
            legacy = builds_dir(out) / f"000000-legacy-{n}"
        log.info("migrating the old site folder %s to %s", out, legacy)
        try:
            if _rename_exchange(link, out):  # out is now the symlink, link the old folder
                os.rename(link, legacy)
            else:
                os.rename(out, legacy)
                os.replace(link, out)
        except OSError as exc:
            if link.is_symlink():
                link.unlink()
            raise SitegenError(
                f"{out}: cannot move the old site folder aside ({exc.strerror}); is it a mount point? Publish to a path inside it instead"
            ) from None
    if durable:
        _fsync_dir(out.parent)


def _obsolete(out: Path, keep: int) -> list[Path]:
    """Builds past the newest ``keep`` (never the live one) and leftovers of killed builds."""
    folder = builds_dir(out)
    live = live_build(out)
    builds = list_builds(out)
    found = [old for old in builds[: max(0, len(builds) - keep)] if live is None or old.resolve() != live]
    for p in folder.iterdir():
        m = STAGING_NAME.match(p.name) or TRASH_NAME.match(p.name)
        if m and not _pid_alive(int(m.group(1))):
            found.append(p)
    return found


def _recycle(out: Path, keep: int, live: Path | None, root: Path) -> tuple[dict[str, tuple[str, int]], int] | None:
    """Rename the newest build that this build would push out of ``keep`` to ``root`` and return
    its files (from its manifest) and when its manifest was written, or None (no such build, or
    no readable manifest). A rebuild then touches only the files that differ from it, instead of
    linking every file of the site into a new folder and deleting a whole old build."""
    builds = list_builds(out)
    past = [b for b in builds[: max(0, len(builds) - (keep - 1))] if live is None or b.resolve() != live]
    if not past:
        return None
    try:
        since = os.lstat(past[-1] / MANIFEST).st_mtime_ns
    except OSError:
        return None
    files = _previous_hashes(past[-1])
    if not files:
        return None
    try:
        os.rename(past[-1], root)
    except OSError:  # (another build took it first)
        return None
    log.info("recycling %s", past[-1].name)
    return {**files, MANIFEST: ("", -1), MANIFEST + ".gz": ("", -1)}, since


def _prune(out: Path, keep: int) -> None:
    for old in _obsolete(out, keep):
        log.info("removing %s", old.name)
        shutil.rmtree(old, ignore_errors=True)
    for p in out.parent.glob(f".{out.name}.link-*"):
        pid = p.name.rsplit("-", 1)[-1]
        if p.is_symlink() and pid.isdigit() and not _pid_alive(int(pid)):
            p.unlink(missing_ok=True)


class Writer:
    """Writes files into a build folder: a file whose content equals the live build's (by the
    live manifest's SHA-256) is hard-linked from it together with its ``.gz`` twin, which makes
    nightly rebuilds cheap. The main process writes through :class:`Staging`; worker processes
    write their runs' pages into the same folder with a ``Writer`` of their own (``old``: the
    live manifest's entries for their files) and hand back :attr:`hashes`."""

    def __init__(
        self,
        root: Path,
        previous: Path | None,
        old: dict[str, tuple[str, int]],
        *,
        replace: bool = False,
        present: dict[str, tuple[str, int]] | None = None,
    ) -> None:
        """``replace``: files already there are replaced (a worker's job that runs again after
        its first worker died may find what that one wrote). ``present``: files the folder
        already holds (a recycled build's, by its manifest): kept when their content is
        wanted, else replaced; :meth:`Staging.commit` removes the ones no one wanted."""
        self.root, self.previous, self.old, self.replace = Path(root), previous, old, replace
        self.present = dict(present or {})
        self.hashes: dict[str, tuple[str, int]] = {}  # every file written: (sha256, size)
        self._root = str(self.root) + "/"
        self._previous = None if previous is None else str(previous) + "/"
        self._dirs: set[str] = {str(self.root)}

    def _target(self, rel: str) -> str:
        if rel in self.hashes:
            raise SitegenError(f"refusing to write {rel!r} twice")
        # checked_relpath refuses "..", absolute and empty parts, and the staging folder holds no
        # symlinks (only this module creates its entries), so the target stays inside it.
        # Plain strings, not Path objects: a rebuild links thousands of files.
        target = self._root + checked_relpath(rel)
        folder = target[: target.rfind("/")]
        if folder not in self._dirs:
            _make_dirs(folder)
            self._dirs.add(folder)
        if self.present.pop(rel, None) is not None or self.replace:
            _unlink(target)
        return target

    def _keep(self, rel: str, digest: str, twin: bool) -> bool:
        """Leave ``rel`` (and its twin) as the folder already holds it, when that is ``digest``
        and its size is still the one recorded."""
        have = self.present.get(rel)
        if have is None or have[0] != digest or (twin and rel + ".gz" not in self.present):
            return False
        names = (rel, rel + ".gz") if twin else (rel,)
        if rel in self.hashes:
            raise SitegenError(f"refusing to write {rel!r} twice")
        for r in names:  # (a loop, not any() over a generator: a rebuild keeps 400,000 files)
            if _linked_size(self._root + r, self.present[r][1]) is None:
                return False
        for r in names:
            self.hashes[r] = self.present.pop(r)
        return True

    def _link(self, rel: str, target: str) -> bool:
        """Hard-link ``rel`` from the live build, if it is there with the size its manifest
        gives (see :class:`Staging`: a power cut may have left it empty)."""
        if self._previous is None or rel not in self.old:
            return False
        try:
            os.link(self._previous + checked_relpath(rel), target)
        except OSError:
            return False
        digest, size = self.old[rel]
        got = _linked_size(target, size)
        if got is None:
            _unlink(target)
            return False
        self.hashes[rel] = (digest, got)
        return True

    def write(self, rel: str, data: bytes | bytearray, *, twin: bytes | None = None) -> None:
        """Write one file (and its ``.gz`` twin when it is a large text file; ``twin``: already
        compressed, e.g. by a worker process)."""
        digest = hashlib.sha256(data).hexdigest()
        wants_twin = needs_twin(rel, data)
        if self._keep(rel, digest, wants_twin):
            return
        target = self._target(rel)
        if self.old.get(rel, ("",))[0] == digest and (not wants_twin or rel + ".gz" in self.old):
            if self._link(rel, target) and (not wants_twin or self._link(rel + ".gz", self._target(rel + ".gz"))):
                return
            for r in (rel, rel + ".gz"):  # a half-done link: fall back to writing both
                self.hashes.pop(r, None)
                _unlink(self._root + r)
        _write_file(target, (data,))
        self.hashes[rel] = (digest, len(data))
        if wants_twin:
            gz = twin if twin is not None else gzip_twin(data)
            gz_target = self._target(rel + ".gz")
            _write_file(gz_target, (gz,))
            st = os.stat(target)
            os.utime(gz_target, ns=(st.st_atime_ns, st.st_mtime_ns))
            self.hashes[rel + ".gz"] = (hashlib.sha256(gz).hexdigest(), len(gz))

    def write_pieces(self, rel: str, pieces: Iterable[bytes]) -> None:
        """Write one file from its pieces as they come, hashed on the way, and its ``.gz`` twin
        (compressed from a second pass over the file): the largest file of a large site, the
        manifest (~90 MB at 100,000 runs), is never held whole. Never kept or linked from an
        older build."""
        target = self._target(rel)
        self.hashes[rel] = _write_pieces(target, pieces)
        if not _twin_wanted(rel, self.hashes[rel][1]):
            return
        gz_target = self._target(rel + ".gz")
        self.hashes[rel + ".gz"] = _write_pieces(gz_target, _compressed(target, gzip_stream()))
        st = os.stat(target)
        os.utime(gz_target, ns=(st.st_atime_ns, st.st_mtime_ns))

    def link_previous(self, rel: str) -> bool:
        """Reuse ``rel`` (and its twin) unchanged from the live build; False when it cannot."""
        if rel in self.old and self._keep(rel, self.old[rel][0], rel + ".gz" in self.old):
            return True
        target = self._target(rel)
        if not self._link(rel, target):
            return False
        if rel + ".gz" in self.old and not self._link(rel + ".gz", self._target(rel + ".gz")):
            self.hashes.pop(rel)
            _unlink(target)
            return False
        return True

    def unlink(self, rels: list[str]) -> None:
        """Take back files (and twins) written or linked in this build."""
        for rel in rels:
            for r in (rel, rel + ".gz"):
                if r in self.hashes:
                    del self.hashes[r]
                    _unlink(self._root + checked_relpath(r))


def _compressed(path: str, pack: Any) -> Iterator[bytes]:
    """The file ``path`` through the compressor ``pack``, a megabyte at a time."""
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            out = pack.compress(chunk)
            if out:
                yield out
    yield pack.flush()


def _linked_size(path: str, size: int) -> int | None:
    """The size of the regular file ``path`` (not a symlink) when it is ``size`` (any size when
    the manifest gave none: -1), else None; made readable by all when a build under a strict
    umask by an older sitegen left it the builder's alone."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode) or size not in (-1, st.st_size):
        return None
    if stat.S_IMODE(st.st_mode) != FILE_MODE:
        os.chmod(path, FILE_MODE)
    return st.st_size


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


class Staging(Writer):
    """A build being written: files go to disk as they are rendered, so memory does not grow with
    the site (see :class:`Writer`). :meth:`commit` makes the build live; leaving the ``with``
    block by an exception removes it.

    ``durable``: the new build is written to storage (``sync``) before it goes live, so that it
    survives a power cut; off by default, since it waits for the disk. Without it, a live build
    that a power cut left damaged is not trusted: its files are linked into the next build only
    when their sizes match its manifest (:meth:`Writer._link`), and the rest is drawn again.
    """

    def __init__(self, out: Path, *, keep: int = 3, durable: bool = False) -> None:
        if keep < 1:
            raise UsageError(f"keep must be at least 1, got {keep}")
        out = Path(out)
        if not out.name or out.name in (".", ".."):
            raise UsageError(f"{out}: not a usable output path")
        _make_dirs(str(out.parent.absolute()))
        _check_out(out)
        self.out, self.keep, self.durable = out, keep, durable
        self.folder = builds_dir(out)
        _make_dirs(str(self.folder))
        root = self.folder / f".staging-{os.getpid()}-{secrets.token_hex(4)}"
        previous = live_build(out)
        got = _recycle(out, keep, previous, root)
        self.recycled = got is not None
        present, self._since = got if got is not None else (None, 0)
        self._old_dirs = folders(present or ())  # (the recycled build's folders, by its manifest)
        if present is None:
            _make_dirs(str(root))
        super().__init__(root, previous, _previous_hashes(previous), present=present)

    def __enter__(self) -> "Staging":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            shutil.rmtree(self.root, ignore_errors=True)

    def old_under(self, prefix: str) -> dict[str, tuple[str, int]]:
        """The live manifest's entries below ``prefix`` (what a worker's :class:`Writer` needs)."""
        if not hasattr(self, "_by_prefix"):
            self._by_prefix: dict[str, dict] = {}
            for rel, entry in self.old.items():
                head, _, rest = rel.partition("/")
                sub = rest.partition("/")[0]
                self._by_prefix.setdefault(f"{head}/{sub}/", {})[rel] = entry
        return self._by_prefix.get(prefix, {})

    def link_many(self, rels: list[str]) -> set[str]:
        """Hard-link ``rels`` (files of the live build, with their twins) into this build; the
        paths that could not be linked (the live build lost them, or a power cut left them
        empty), which the caller draws again."""
        missing, named = set(), set(rels)
        for rel in rels:
            if rel.endswith(".gz") and rel[:-3] in named:
                continue  # (linked with its file)
            if rel not in self.hashes and not self.link_previous(rel):
                missing.add(rel)
        return missing

    def adopt(self, hashes: dict[str, tuple[str, int]]) -> None:
        """Files a worker wrote into this build (each path at most once)."""
        for rel in hashes:
            if rel in self.hashes:
                raise SitegenError(f"refusing to write {rel!r} twice")
            checked_relpath(rel)
            self.present.pop(rel, None)  # (the worker replaced it)
        self.hashes.update(hashes)

    def _remove_leftovers(self) -> None:
        """In a recycled build, remove every entry this build did not write or keep: the
        recycled build's files no one wanted, its folders this build has no file in, and
        whatever a hand left there. Why not a walk of the whole folder: a file added, removed or
        renamed changes its folder's mtime, so only folders changed since the recycled build's
        manifest was written are listed (one ``lstat`` a folder, not a listing)."""
        left, self.present = self.present, {}
        if not self.recycled:
            return
        for rel in left:
            _unlink(self._root + rel)
        wanted = set(folders(self.hashes))
        for rel in self._old_dirs:
            path = self._root + rel
            if rel not in wanted:
                shutil.rmtree(path, ignore_errors=True)
                continue
            try:
                changed = not rel or os.lstat(path).st_mtime_ns >= self._since
            except OSError:
                continue
            if not changed:
                continue
            prefix = rel + "/" if rel else ""
            with os.scandir(path) as entries:
                for e in entries:
                    if e.is_dir(follow_symlinks=False):
                        if prefix + e.name not in wanted:
                            shutil.rmtree(e.path, ignore_errors=True)
                    elif prefix + e.name not in self.hashes:
                        os.unlink(e.path)

    def commit(self) -> Path:
        """Make this build live (atomically) and prune old builds; returns its folder."""
        self._remove_leftovers()
        if self.durable:
            os.sync()  # the whole tree is on storage before it can become live
        h = hashlib.sha256()
        for rel in sorted(self.hashes):
            h.update(rel.encode("utf-8", "surrogatepass") + b"\0" + bytes.fromhex(self.hashes[rel][0]))
        with _locked(self.folder):
            existing = list_builds(self.out)
            seq = build_number(existing[-1]) + 1 if existing else 1
            final = self.folder / f"{seq:06d}-{h.hexdigest()[:12]}"
            os.rename(self.root, final)
            try:
                if self.durable:  # (a directory's fsync waits for the disk like the sync does)
                    _fsync_dir(self.folder)
                _switch(self.out, final, self.durable)
            except BaseException:  # (e.g. no room for the new symlink) never left as a build
                if live_build(self.out) != final.resolve():
                    shutil.rmtree(final, ignore_errors=True)
                raise
            _prune(self.out, self.keep)
        log.info("published %s -> %s", self.out, final.name)
        return final


def tidy(out: Path, keep: int) -> None:
    """Prune to ``keep`` builds and remove leftovers of killed builds, without a new build (a
    rebuild that found nothing to change)."""
    if keep < 1:
        raise UsageError(f"keep must be at least 1, got {keep}")
    with _locked(builds_dir(out)):
        _prune(Path(out), keep)


def publish(files: dict[str, bytes], out: Path, *, keep: int = 3, durable: bool = False) -> Path:
    """Make ``out`` serve a site made of ``files``; switch only once everything is on disk.

    Returns the build folder ``out`` now points at. ``keep`` builds (including the new one) are
    kept for rollback (``ln -sfn .<out>.builds/<older> <out>``); older ones are removed.
    """
    with Staging(Path(out), keep=keep, durable=durable) as stage:
        for rel in sorted(files):
            if rel.endswith(".gz") and rel[:-3] in files:
                continue  # written with its original
            stage.write(rel, files[rel], twin=files.get(rel + ".gz"))
        return stage.commit()
