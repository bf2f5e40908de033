"""Moving a built source to another machine: ``chiezo export SOURCE FILE`` and ``chiezo import
FILE`` (docs/cli.md).

The file is a tar archive compressed with zstd (inspectable with ``tar --zstd -tvf``; archives
of earlier versions — plain, gzip or xz tars — import too), in this order:

    manifest.json    what it holds: format, source name, kind, language, schema version,
                     generation id, built_at, documents, chunks, the input identity, vectors
                     (model, dimension, count), and the generation's size and sha256
    generation.db    the current generation, byte for byte

The manifest comes first so an import can refuse (another schema version, a name that is
taken, too little disk) before it reads gigabytes. Both sides stream: a generation is read and
written in 256 KiB pieces, never held in memory.

An archive is hostile input until proven otherwise. The import reads exactly the two members
it expects, by name, as regular files (a link, a folder, a path, another member: refused —
member names are never used as paths); the manifest is at most 1 MiB; the generation is
written to a new ``.building`` file of the source's folder and checked against the manifest's
size and sha256, then opened as a Chiezo source (the same schema check as serving), checked by
SQLite (``quick_check``) and compared with the manifest (kind, documents, generation). Only
then is it switched in like a build — ``current`` repointed atomically, the previous
generation kept (``chiezo rollback`` returns to it). Anything wrong removes the new file and
changes nothing.

The vector index (``gen-….db.usearch``) does not travel: an HNSW file is read by native code
that is not made for files from strangers. The index is the vectors' one store on this side
(store/vectors.py), so an export carries them as a third member, ``vectors.f16``: a plain
little-endian float16 array in ``vec_id`` order, sized and hashed in the manifest, read by
numpy and checked (size, finite values) before the index is rebuilt from it on import. An
archive of an earlier version carries its vectors in the generation's ``vec`` column instead;
it imports too.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import tarfile
import time
import zlib  # a damaged gzip archive ("r|*" reads gzip, bz2 and xz too)
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import zstandard

from chiezo import __version__
from chiezo.core import db
from chiezo.core.config import Settings
from chiezo.core.errors import BadQuery, Conflict, InputError, SchemaMismatch
from chiezo.core.progress import NullProgress, Progress
from chiezo.core.schema import SCHEMA_VERSION, readable_version, versions_read
from chiezo.store import generations
from chiezo.store.build import require_disk
from chiezo.store.library import raw_meta
from chiezo.store.source_info import without_credentials

FORMAT = "chiezo-source-export"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
DATA = "generation.db"
VECTORS = "vectors.f16"
MAX_DIM = 8192  # a bound for a number read from a stranger's file
MAX_MANIFEST_BYTES = 1 << 20
MAX_GENERATION_BYTES = 1 << 44  # 16 TiB: a bound for a number read from a stranger's file
CHUNK = 1 << 18  # 256 KiB pieces: a tar stream copies each a few times on its way
FREE_MARGIN = 64 * 2**20
SHA256 = re.compile(r"^[0-9a-f]{64}$")
ZSTD_LEVEL = 3  # 0.57 of the size at ~250 MiB/s on 2 cores; level 6 is 0.55 at half the speed
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


# -- export ------------------------------------------------------------------------------------


def export_source(
    settings: Settings,
    name: str,
    dest: Path,
    *,
    overwrite: bool = False,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Write source ``name``'s current generation with its manifest to ``dest`` (through
    ``dest.part``, renamed when complete); return the manifest with the file's path and size."""
    progress = progress or NullProgress()
    directory = _existing_source(settings, name)
    if dest.exists() and not overwrite:
        raise BadQuery(f"{dest} exists", path=str(dest), hint="choose another file or add --force")
    generation = generations.current_path(directory)
    if generation is None:
        raise BadQuery(f"{name!r} has no current generation to export", source=name)
    with (
        _credential_free(generation, dest) as exported,
        open(exported, "rb") as data,  # open: a build may prune the file, not this handle
    ):
        meta = check_generation(name, exported)
        size = os.fstat(data.fileno()).st_size
        digest = _sha256(data, size, progress, f"checking {name}")
        manifest = _manifest(name, meta, generation.name, size, digest)
        part = dest.with_name(dest.name + ".part")
        loose = dest.with_name(dest.name + ".vectors.part")
        try:
            if manifest["vectors"]:
                manifest["vectors"]["file"] = _vectors_file(name, generation, meta, loose, progress)
            _write_archive(part, manifest, data, size, loose, progress)
            os.replace(part, dest)
        except BaseException:
            part.unlink(missing_ok=True)
            raise
        finally:
            loose.unlink(missing_ok=True)
    return {**manifest, "path": str(dest), "archive_bytes": dest.stat().st_size}


@contextlib.contextmanager
def _credential_free(generation: Path, dest: Path):
    """The generation to export: itself, or — for a live source registered before addresses
    were taken apart, whose recorded address carries a user and password — a copy whose
    meta records the address without them. An archive never carries credentials."""
    raw = _json((raw_meta(generation) or {}).get("input"))
    if not isinstance(raw, dict) or without_credentials(raw) == raw:
        yield generation
        return
    copy = dest.with_name(dest.name + ".generation.part")
    try:
        shutil.copyfile(generation, copy)
        conn = db.open_for_build(copy)
        try:
            conn.execute(
                "UPDATE meta SET value = ? WHERE key = 'input'",
                (json.dumps(without_credentials(raw), ensure_ascii=False),),
            )
        finally:
            conn.close()
        yield copy
    finally:
        copy.unlink(missing_ok=True)


def _manifest(name: str, meta: dict[str, str], file_name: str, size: int, digest: str) -> dict:
    vectors = None
    if meta.get("embedding_model"):
        vectors = {
            "model": meta["embedding_model"],
            "dim": _int(meta.get("embedding_dim")),
            "count": _int(meta.get("vector_count")),
        }
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "exported_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "chiezo_version": __version__,
        "source": name,
        "kind": meta.get("kind", ""),
        "language": meta.get("language") or None,
        "schema_version": _int(meta.get("schema_version")),
        "generation": meta.get("generation") or file_name,
        "built_at": meta.get("built_at"),
        "docs": _int(meta.get("doc_count")),
        "chunks": _int(meta.get("chunk_count")),
        "input": _json(meta.get("input")),
        "vectors": vectors,
        "file": {"name": DATA, "bytes": size, "sha256": digest},
    }


def _vectors_file(
    name: str, generation: Path, meta: dict[str, str], out: Path, progress: Progress
) -> dict:
    """The generation's vectors, read from its index in ``vec_id`` order, written to ``out``
    as float16 rows; returns the manifest's entry for them."""
    from chiezo.store import vectors as vec

    info = vec.vector_info(meta)
    assert info is not None, "called for a source with vectors"
    index = vec.VectorIndex(generation, info)
    progress.phase("reading the vectors", info.count, "vectors")
    digest, written = hashlib.sha256(), 0
    conn = db.open_readonly(generation)
    try:
        with open(out, "wb") as raw:
            for ids in vec.vec_ids(conn):
                found, matrix = index.vectors(ids)
                if len(found) != len(ids):
                    raise BadQuery(
                        f"the vector index of {name!r} lacks {len(ids) - len(found):,} of "
                        "its vectors: embed the source again",
                        source=name,
                    )
                piece = matrix.astype("<f2").tobytes()
                raw.write(piece)
                digest.update(piece)
                written += len(piece)
                progress.advance(len(ids))
    finally:
        conn.close()
    return {"name": VECTORS, "bytes": written, "sha256": digest.hexdigest()}


def _write_archive(
    path: Path, manifest: dict, data: IO[bytes], size: int, loose: Path, progress: Progress
) -> None:
    """The tar (manifest first, then the generation, then its vectors when it has them —
    ``loose``, written by ``_vectors_file``) through a zstd stream: docs/design.md
    §35.1 measured level 3 on every core at 0.57 of the size and ~250 MiB/s (xz at its fastest
    5 MiB/s, gzip 43 MiB/s at 0.60)."""
    encoded = json.dumps(manifest, ensure_ascii=False, indent=2).encode("utf-8")
    compressor = zstandard.ZstdCompressor(level=ZSTD_LEVEL, threads=-1)
    with open(path, "wb") as raw:
        with (
            compressor.stream_writer(raw, closefd=False) as packed,
            tarfile.open(fileobj=packed, mode="w|", format=tarfile.PAX_FORMAT) as tar,
        ):
            tar.addfile(_member(MANIFEST, len(encoded)), _Reader(_bytes_io(encoded)))
            data.seek(0)
            progress.phase(f"writing {path.name.removesuffix('.part')}", size, "B")
            tar.addfile(_member(DATA, size), _Reader(data, progress.advance))
            if manifest["vectors"]:
                with open(loose, "rb") as vectors:
                    tar.addfile(_member(VECTORS, manifest["vectors"]["file"]["bytes"]), vectors)
        raw.flush()
        os.fsync(raw.fileno())


@contextlib.contextmanager
def _open_archive(archive: Path) -> Iterator[tarfile.TarFile]:
    """The export's tar as a stream (one pass, no seeking): zstd-compressed as export writes
    it, or a plain/gzip/xz tar (an earlier version's export)."""
    with open(archive, "rb") as raw:
        if raw.read(len(ZSTD_MAGIC)) != ZSTD_MAGIC:
            raw.seek(0)
            with tarfile.open(fileobj=raw, mode="r|*") as tar:
                yield tar
            return
        raw.seek(0)
        unpacked = zstandard.ZstdDecompressor().stream_reader(raw, closefd=False)
        with unpacked, tarfile.open(fileobj=unpacked, mode="r|") as tar:
            yield tar


def _member(name: str, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = size, 0o644, int(time.time())
    return info


# -- import ------------------------------------------------------------------------------------


def import_source(
    settings: Settings,
    archive: Path,
    *,
    name: str | None = None,
    replace: bool = False,
    input_path: Path | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Switch in the generation ``archive`` holds as source ``name`` (default: the name it was
    exported under), like a build: a new generation file, ``current`` repointed atomically,
    the previous one kept. A source of that name is replaced only with ``replace``.
    ``input_path``: where this source's input is on this machine (its documents' folder, its
    dump), chosen by the user — the only place its original files are served from and a
    rebuild reads; the paths the archive names are kept as information only."""
    progress = progress or NullProgress()
    if not archive.is_file():
        raise InputError(f"no such file: {archive}", path=str(archive))
    if input_path is not None and not input_path.exists():
        raise InputError(
            f"no such file or folder: {input_path}",
            path=str(input_path),
            hint="--input names this source's input on this machine",
        )
    try:
        with _open_archive(archive) as tar:
            manifest = _read_manifest(tar, archive)
            target = generations.check_name(name or manifest["source"])
            directory = generations.source_dir(settings.corpus_dir, target)
            _check_target(directory, target, replace)
            _check_room(directory, manifest)
            local = local_input(manifest, input_path)
            with _locked_folder(directory):
                return _switch_in(tar, archive, manifest, directory, local, progress)
    except (tarfile.TarError, EOFError, zlib.error, zstandard.ZstdError) as exc:
        raise InputError(
            f"{archive} is not a complete Chiezo export ({exc}); nothing was changed",
            path=str(archive),
            hint="export it again (`chiezo export SOURCE FILE`) and copy the whole file",
        ) from exc


@contextlib.contextmanager
def _locked_folder(directory: Path):
    """The source's folder, made if need be, under its build lock. A folder made here is
    removed again — still under the lock, so no other import has taken it meanwhile — when
    the import is refused: 10 refused imports once left 10 empty folders listed as sources."""
    made = not directory.exists()
    directory.mkdir(parents=True, exist_ok=True)
    with generations.BuildLock(directory):
        try:
            yield
        except BaseException:
            if made and generations.current_path(directory) is None:
                shutil.rmtree(directory, ignore_errors=True)
            raise


def local_input(manifest: dict, chosen: Path | None) -> dict[str, Any]:
    """The input record an imported generation gets here: the folder or file the user chose
    (or none), with the archive's plain options (language, passage size…). The archive's
    paths — its input, path-valued options such as a lookup file, where it was fetched from —
    are another machine's and a stranger's: an archive naming ``/`` as its documents' folder
    would serve /etc/passwd as an "original". They are never used here."""
    if chosen is None:
        return {}
    recorded = given if isinstance(given := manifest.get("input"), dict) else {}
    options = asked if isinstance(asked := recorded.get("options"), dict) else {}
    kept = {k: v for k, v in options.items() if _plain_option(v)}
    return {"path": str(chosen.resolve()), **({"options": kept} if kept else {})}


def _plain_option(value: Any) -> bool:
    """An option value that is a setting, not a path or a record of another machine."""
    if isinstance(value, bool | int | float):
        return True
    if not isinstance(value, str) or len(value) > 200:
        return False
    return not (
        value.startswith(("/", "~", "\\")) or "://" in value or re.match(r"^[A-Za-z]:[\\/]", value)
    )


def _switch_in(
    tar: tarfile.TarFile,
    archive: Path,
    manifest: dict,
    directory: Path,
    local: dict,
    progress: Progress,
) -> dict[str, Any]:
    """Receive the generation into the source's folder, check it, switch it in (build lock
    held); any failure removes what was written."""
    name = directory.name
    generations.remove_debris(directory)
    final = directory / generations.new_generation_name()
    building = directory / (final.name + generations.BUILDING_SUFFIX)
    try:
        loose = final.with_name(final.name + ".vectors" + generations.BUILDING_SUFFIX)
        _receive(tar, archive, manifest, building, loose, progress)
        progress.phase("checking the generation", 3, "checks")
        meta = check_generation(name, building, manifest, progress.advance)
        if manifest["vectors"]:
            _index_vectors(building, final, manifest["vectors"], loose, progress)
            loose.unlink(missing_ok=True)
        _stamp(building, final, manifest, local)
        progress.phase("switching", None, "steps")
        replaced = generations.install(building, final)
        generations.prune(directory, [final, replaced])
    except BaseException:
        for leftover in [building, *generations.sidecars(final)]:
            leftover.unlink(missing_ok=True)
        raise
    return {
        "source": name,
        "current": final.name,
        "previous": replaced.name if replaced else None,
        "docs": _int(meta.get("doc_count")),
        "kind": manifest["kind"],
        "generation": manifest["generation"],
        "sha256": manifest["file"]["sha256"],
        "bytes": final.stat().st_size,
    }


def _read_manifest(tar: tarfile.TarFile, archive: Path) -> dict[str, Any]:
    member = tar.next()
    if member is None or member.name != MANIFEST or not member.isreg():
        raise InputError(
            f"{archive} does not start with {MANIFEST}: not a Chiezo export", path=str(archive)
        )
    if member.size > MAX_MANIFEST_BYTES:
        raise InputError(
            f"{MANIFEST} of {archive} is {member.size:,} bytes; at most "
            f"{MAX_MANIFEST_BYTES:,} are read",
            path=str(archive),
        )
    raw = _read_exactly(tar.extractfile(member), member.size)
    try:
        manifest = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"{MANIFEST} of {archive} is not valid JSON", path=str(archive)) from exc
    return _checked_manifest(manifest, archive)


def _checked_manifest(manifest: Any, archive: Path) -> dict[str, Any]:
    """The manifest with every field this import relies on of the right type and bounds."""

    def refuse(what: str) -> InputError:
        return InputError(f"{MANIFEST} of {archive}: {what}", path=str(archive))

    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise refuse(f"not a {FORMAT} manifest")
    if manifest.get("format_version") != FORMAT_VERSION:
        raise refuse(
            f"format version {manifest.get('format_version')!r}; this Chiezo reads "
            f"{FORMAT_VERSION} (a newer Chiezo wrote it?)"
        )
    file = manifest.get("file")
    if not (
        isinstance(file, dict)
        and file.get("name") == DATA
        and isinstance(file.get("bytes"), int)
        and 0 < file["bytes"] <= MAX_GENERATION_BYTES
        and isinstance(file.get("sha256"), str)
        and SHA256.match(file["sha256"])
    ):
        raise refuse("its file entry needs name, bytes and a sha256")
    for key in ("source", "kind", "generation"):
        if not isinstance(manifest.get(key), str) or len(manifest[key]) > 200:
            raise refuse(f"{key} must be a short text")
    version = manifest.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise refuse("schema_version must be a number")
    if not readable_version(version):
        raise SchemaMismatch(
            f"{archive} holds a generation of schema version {version}; this Chiezo reads "
            f"version {versions_read()}: nothing was imported",
            schema_version=version,
            expected_schema_version=SCHEMA_VERSION,
            hint=(
                "rebuild the source on the machine it comes from with this version, or here "
                "from its input"
                if version < SCHEMA_VERSION
                else "upgrade Chiezo here"
            ),
        )
    vectors = manifest.get("vectors")
    if vectors is not None and not (
        isinstance(vectors, dict)
        and isinstance(vectors.get("dim"), int)
        and 0 < vectors["dim"] <= MAX_DIM
        and isinstance(vectors.get("count"), int)
        and 0 <= vectors["count"] <= MAX_GENERATION_BYTES
    ):
        raise refuse("vectors must name their dimension and count")
    loose = vectors.get("file") if vectors else None
    if (
        vectors is not None
        and loose is not None
        and not (
            isinstance(loose, dict)
            and loose.get("name") == VECTORS
            and loose.get("bytes") == 2 * vectors["dim"] * vectors["count"]
            and isinstance(loose.get("sha256"), str)
            and SHA256.match(loose["sha256"])
        )
    ):
        raise refuse(
            f"its vectors' file entry needs name {VECTORS}, 2 × dim × count bytes, a sha256"
        )
    return manifest


def _check_target(directory: Path, name: str, replace: bool) -> None:
    if generations.current_path(directory) is not None and not replace:
        raise Conflict(
            f"a source named {name!r} exists; importing would replace what it serves",
            source=name,
            hint="add --replace (its generation is kept: `chiezo rollback` returns to it), "
            "or import under another name with --name",
        )


def _check_room(directory: Path, manifest: dict) -> None:
    """Refuse before writing when the disk cannot hold the generation and its vector index."""
    vectors = manifest["vectors"] or {}
    # the HNSW file (fp16 vectors plus about as much again for the graph, measured ~2x) and,
    # while it is built, the vectors as received
    index = 3 * 2 * max(vectors.get("dim", 0), 0) * max(vectors.get("count", 0), 0)
    require_disk(
        directory,
        manifest["file"]["bytes"] + index + FREE_MARGIN,
        f"import {manifest['source']!r}",
        InputError,
        "; nothing was written",
    )


def _receive(
    tar: tarfile.TarFile,
    archive: Path,
    manifest: dict,
    building: Path,
    loose: Path,
    progress: Progress,
) -> None:
    """The generation member, streamed into ``building``, then the vectors' member (when the
    manifest names one) into ``loose``, each checked against the manifest; nothing after."""
    _receive_member(tar, archive, manifest["file"], building, manifest["source"], progress)
    expected = (manifest["vectors"] or {}).get("file")
    if expected:
        _receive_member(tar, archive, expected, loose, f"{manifest['source']}'s vectors", progress)
    extra = tar.next()
    if extra is not None:
        last = expected["name"] if expected else DATA
        raise InputError(f"{archive} holds {extra.name!r} after {last}: refused", path=str(archive))


def _receive_member(
    tar: tarfile.TarFile,
    archive: Path,
    expected: dict,
    out: Path,
    what: str,
    progress: Progress,
) -> None:
    name = expected["name"]
    member = tar.next()
    if member is None:
        raise InputError(
            f"{archive} ends before {name}: it was cut short; nothing was changed",
            path=str(archive),
        )
    if member.name != name or not member.isreg():
        raise InputError(
            f"{archive} holds {member.name!r} where {name} was expected (a regular file): refused",
            path=str(archive),
        )
    if member.size != expected["bytes"]:
        raise InputError(
            f"{name} is {member.size:,} bytes, the manifest says {expected['bytes']:,}: refused",
            path=str(archive),
        )
    progress.phase(f"receiving {what}", member.size, "B")
    digest = hashlib.sha256()
    source = tar.extractfile(member)
    assert source is not None  # a regular file (checked above) always has its contents
    with open(out, "xb") as written:
        left = member.size
        while left:
            piece = source.read(min(CHUNK, left))
            if not piece:
                raise InputError(
                    f"{archive} ends inside {name}: it was cut short; nothing was changed",
                    path=str(archive),
                )
            written.write(piece)
            digest.update(piece)
            left -= len(piece)
            progress.advance(len(piece))
    if digest.hexdigest() != expected["sha256"]:
        raise InputError(
            f"{name} of {archive} does not match its checksum (sha256 {digest.hexdigest()}, the "
            f"manifest says {expected['sha256']}): damaged or altered; nothing was changed",
            path=str(archive),
            hint="copy the file again, or export it again",
        )


def check_generation(
    name: str,
    path: Path,
    manifest: dict | None = None,
    checked: Callable[[int], None] | None = None,
) -> dict[str, str]:
    """The meta table of ``path`` once it opens as a Chiezo source this program reads (the
    serving path's schema check, library.Source) and passes SQLite's ``quick_check``; with a
    ``manifest``, its kind, documents and generation must be the file's. InputError or
    SchemaMismatch otherwise. ``checked()`` after each of the three checks."""
    from chiezo.store.library import Source

    checked = checked or NullProgress().advance
    try:
        source = Source(name, path)
    except SchemaMismatch as exc:
        raise SchemaMismatch(
            f"the generation of {name!r} does not open as a source this Chiezo "
            f"reads: {exc.message}",
            source=name,
            **{k: v for k, v in exc.extras.items() if k.endswith("schema_version")},
        ) from exc
    checked(1)
    try:
        conn = source.conn
        conn.execute("PRAGMA trusted_schema = OFF")  # a stranger's file: no functions from it
        problems = [r[0] for r in conn.execute("PRAGMA quick_check(5)")]
        meta = dict(source.meta)
    except db.Error as exc:
        raise InputError(f"the generation of {name!r} cannot be read: {exc}") from exc
    finally:
        source.conn.close()
    if problems != ["ok"]:
        raise InputError(
            f"the generation of {name!r} failed SQLite's check: " + "; ".join(problems)
        )
    checked(1)
    if manifest is not None:
        _match_manifest(name, meta, manifest)
    checked(1)
    return meta


def _match_manifest(name: str, meta: dict[str, str], manifest: dict) -> None:
    said = {
        "kind": manifest["kind"],
        "doc_count": str(manifest.get("docs")),
        "generation": manifest["generation"],
    }
    for key, value in said.items():
        if meta.get(key) != value:
            raise InputError(
                f"the generation of {name!r} says {key} {meta.get(key)!r}, its "
                f"manifest {value!r}: refused"
            )


def _index_vectors(
    building: Path, final: Path, vectors: dict, loose: Path, progress: Progress
) -> None:
    """The vector index of the imported generation, built here from the vectors it came with:
    the archive's ``vectors.f16`` member, or (an archive of an older Chiezo) the generation's
    own ``vec`` column."""
    from chiezo.store import vectors as vec

    dim = int(vectors["dim"])
    progress.phase("indexing vectors", vectors["count"], "vectors")
    conn = db.open_readonly(building, immutable=False)
    try:
        with contextlib.ExitStack() as stack:
            if vectors.get("file"):
                raw = stack.enter_context(open(loose, "rb"))
                batches = vec.file_batches(conn, raw, dim)
            elif vec.has_vector_column(conn):
                batches = vec.column_batches(conn, dim)
            else:
                raise InputError(
                    "the archive says its source has vectors but carries none: refused",
                    hint="export it again with this version of Chiezo",
                )
            index = vec.write_index(batches, final, dim, added=progress.advance)
    except (ValueError, RuntimeError, db.Error) as exc:  # blobs of another size, a bad dim
        raise InputError(f"the generation's vectors cannot be indexed ({exc}): refused") from exc
    finally:
        conn.close()
    if len(index) != vectors["count"]:
        raise InputError(
            f"the generation holds {len(index):,} vectors, its manifest says "
            f"{vectors['count']:,}: refused"
        )


def _stamp(building: Path, final: Path, manifest: dict, local: dict) -> None:
    """Record in the file which generation it is here, where it came from, and its input on
    this machine (``local_input``) — replacing what the archive's meta table says of it."""
    came = {k: manifest.get(k) for k in ("source", "generation", "exported_at", "chiezo_version")}
    came["sha256"] = manifest["file"]["sha256"]
    conn = db.open_for_build(building)
    try:
        exported = conn.execute("SELECT value FROM meta WHERE key = 'input'").fetchone()
        came["input"] = _json(exported[0]) if exported else None  # information, never used
        conn.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES ('generation', ?), "
            "('imported_at', ?), ('imported_from', ?), ('input', ?), ('input_chosen', ?)",
            (
                final.name,
                time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                json.dumps(came, ensure_ascii=False),
                json.dumps(local, ensure_ascii=False),
                "here",
            ),
        )
    finally:
        conn.close()


# -- shared ------------------------------------------------------------------------------------


def _existing_source(settings: Settings, name: str) -> Path:
    if name == "notes":
        raise BadQuery(
            "the notes source is not a built source and is not exported",
            source=name,
            hint="back up $CHIEZO_DATA/notes/ instead (docs/operations.md)",
        )
    directory = generations.source_dir(settings.corpus_dir, name)
    if generations.current_path(directory) is None:
        from chiezo.store.library import Library

        Library(settings).get(name)  # UnknownSource, naming the known ones
    return directory


def _sha256(data: IO[bytes], size: int, progress: Progress, what: str) -> str:
    progress.phase(what, size, "B")
    digest = hashlib.sha256()
    data.seek(0)
    while piece := data.read(CHUNK):
        digest.update(piece)
        progress.advance(len(piece))
    return digest.hexdigest()


def _read_exactly(stream: IO[bytes] | None, size: int) -> bytes:
    data = stream.read(size) if stream is not None else b""
    if len(data) != size:
        raise EOFError(f"{MANIFEST} is cut short")
    return data


class _Reader:
    """A file object tarfile copies from, counting what it reads (the export's progress)."""

    def __init__(self, inner: IO[bytes], counted: Callable[[int], None] | None = None) -> None:
        self.inner, self.counted = inner, counted

    def read(self, size: int = -1) -> bytes:
        piece = self.inner.read(size)
        if self.counted is not None and piece:
            self.counted(len(piece))
        return piece


def _bytes_io(data: bytes) -> IO[bytes]:
    import io

    return io.BytesIO(data)


def _json(value: str | None) -> Any:
    try:
        return json.loads(value) if value else None
    except ValueError:
        return None


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0
