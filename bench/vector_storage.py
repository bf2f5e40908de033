"""Where a source's vectors are kept, before and after the index became their one store
(issue #33 item 2): the jawiki excerpt built and embedded with use-m (the default units), then
measured as it is served now against the same generation in the layout embeds wrote before —
every vector also in a ``vec`` column of ``chunk_vectors``, and a cache holding every vector
once more — both made from it in the same run. Now the index is the vectors' store, the
generation keeps each vector's text hash, and the cache lets go of what a generation holds.

    python bench/vector_storage.py            # builds and embeds into bench/work/vector_storage
    python bench/vector_storage.py --reuse    # measures what an earlier run left there

Reports, for both layouts: the generation file (after VACUUM, so free pages do not count), the
``chunk_vectors`` table by dbstat, the HNSW index, the embedding cache, and the zstd export
(the exporter's own level); plus that the vectors read back from the index equal the column's
bit for bit. Prints a table and writes JSON to bench/results/vector_storage.json.
"""

from __future__ import annotations

import argparse
import io
import json
import shutil
import sqlite3
import sys
import tarfile
import time
from pathlib import Path

import zstandard
from rich.console import Console
from rich.table import Table

from chiezo.ops import building

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from chiezo.core.config import Settings  # noqa: E402
from chiezo.ops import transfer  # noqa: E402
from chiezo.ops.context import Context  # noqa: E402
from chiezo.store import generations, vector_cache  # noqa: E402
from chiezo.store.vectors import VectorIndex, index_path, vec_ids, vector_info  # noqa: E402

from corpus import SHARED  # noqa: E402

EXCERPT = SHARED / "data/wikipedia/jawiki-20230501-excerpt.xml.bz2"
WORK = HERE / "work" / "vector_storage"
console = Console(width=120)
MiB = 2**20


def built(settings: Settings, reuse: bool) -> Path:
    service = Context(settings)
    if not (reuse and "jawiki" in service.library.names()):
        started = time.monotonic()
        building.ingest(service, "wikipedia", EXCERPT, "jawiki", embed=False)
        console.print(f"built the excerpt in {time.monotonic() - started:.0f} s")
        started = time.monotonic()
        report = building.embed(service, "jawiki", "use-m")
        console.print(f"embedded {report.vectors:,} vectors in {time.monotonic() - started:.0f} s")
    return generations.current_path(settings.corpus_dir / "jawiki")


def with_column(generation: Path, out: Path) -> None:
    """``generation`` as embeds wrote it before: each row of ``chunk_vectors`` with its vector
    in a ``vec`` column (float16, read back from the index)."""
    shutil.copyfile(generation, out)
    conn = sqlite3.connect(out)
    meta = dict(conn.execute("SELECT key, value FROM meta"))
    index = VectorIndex(generation, vector_info(meta))
    conn.execute(
        "CREATE TABLE old_vectors (vec_id INTEGER PRIMARY KEY, chunk_id INTEGER NOT NULL, "
        "span_start INTEGER NOT NULL, span_end INTEGER NOT NULL, vec BLOB NOT NULL)"
    )
    for ids in vec_ids(conn):
        found, matrix = index.vectors(ids)
        assert found == ids, "every vector is in the index"
        owners = dict(
            (r[0], r[1:])
            for r in conn.execute(
                f"SELECT vec_id, chunk_id, span_start, span_end FROM chunk_vectors "
                f"WHERE vec_id IN ({','.join('?' * len(ids))})",
                ids,
            )
        )
        conn.executemany(
            "INSERT INTO old_vectors VALUES (?, ?, ?, ?, ?)",
            [
                (v, *owners[v], row.astype("<f2").tobytes())
                for v, row in zip(ids, matrix, strict=True)
            ],
        )
    conn.execute("DROP TABLE chunk_vectors")
    conn.execute("ALTER TABLE old_vectors RENAME TO chunk_vectors")
    conn.execute("CREATE INDEX chunk_vectors_by_chunk ON chunk_vectors (chunk_id)")
    conn.commit()
    conn.execute("VACUUM")
    conn.close()


def full_cache(generation: Path, out: Path) -> int:
    """Bytes of the cache as embeds left it before: every vector of ``generation`` by its text
    hash, in the cache's own layout (vector_cache.TABLE, PAGE_SIZE)."""
    conn = sqlite3.connect(out)
    conn.execute(f"PRAGMA page_size = {vector_cache.PAGE_SIZE}")
    conn.execute(vector_cache.TABLE)
    source = sqlite3.connect(f"file:{generation}?mode=ro", uri=True)
    meta = dict(source.execute("SELECT key, value FROM meta"))
    index = VectorIndex(generation, vector_info(meta))
    for ids in vec_ids(source):
        keys = dict(
            source.execute(
                f"SELECT vec_id, unit_hash FROM chunk_vectors "
                f"WHERE vec_id IN ({','.join('?' * len(ids))})",
                ids,
            )
        )
        found, matrix = index.vectors(ids)
        conn.executemany(
            "INSERT OR IGNORE INTO vectors (key, v) VALUES (?, ?)",
            [(keys[v], row.astype("<f2").tobytes()) for v, row in zip(found, matrix, strict=True)],
        )
    conn.commit()
    conn.close()
    source.close()
    size = out.stat().st_size
    out.unlink()
    return size


def vacuumed(generation: Path, out: Path) -> None:
    shutil.copyfile(generation, out)
    conn = sqlite3.connect(out)
    conn.execute("VACUUM")
    conn.close()


def table_bytes(path: Path) -> int:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return conn.execute(
            "SELECT sum(pgsize) FROM dbstat WHERE name IN "
            "('chunk_vectors', 'chunk_vectors_by_chunk', 'chunk_vectors_by_hash')"
        ).fetchone()[0]
    finally:
        conn.close()


def zstd_tar_bytes(members: list[Path]) -> int:
    """Bytes of a tar of ``members`` through the exporter's zstd level (in memory: the excerpt
    is small)."""
    packed = io.BytesIO()
    compressor = zstandard.ZstdCompressor(level=transfer.ZSTD_LEVEL, threads=-1)
    with (
        compressor.stream_writer(packed, closefd=False) as stream,
        tarfile.open(fileobj=stream, mode="w|", format=tarfile.PAX_FORMAT) as tar,
    ):
        for member in members:
            tar.add(member, arcname=member.name)
    return len(packed.getvalue())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reuse", action="store_true")
    args = parser.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    settings = Settings(data_dir=WORK / "data")
    generation = built(settings, args.reuse)
    meta = dict(
        sqlite3.connect(f"file:{generation}?mode=ro", uri=True).execute("SELECT * FROM meta")
    )
    scratch = WORK / "scratch"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir()
    after, before = scratch / "after.db", scratch / "before.db"
    vacuumed(generation, after)
    with_column(generation, before)
    cache = vector_cache.directory_of(settings) / (vector_cache.stem("use-m") + vector_cache.SUFFIX)
    index = index_path(generation).stat().st_size
    archive = WORK / "jawiki.tar.zst"
    started = time.monotonic()
    transfer.export_source(settings, "jawiki", archive, overwrite=True)
    export_s = time.monotonic() - started
    rows = {
        "before: vectors in the file, the index and the cache": {
            "generation": before.stat().st_size,
            "chunk_vectors": table_bytes(before),
            "index": index,
            "cache": full_cache(generation, scratch / "cache.db"),
            "export": zstd_tar_bytes([before]),
        },
        "after: in the index (the cache lets go)": {
            "generation": after.stat().st_size,
            "chunk_vectors": table_bytes(after),
            "index": index,
            "cache": cache.stat().st_size,
            "export": archive.stat().st_size,
        },
    }
    table = Table(title=f"jawiki excerpt, {int(meta['vector_count']):,} use-m vectors (MiB)")
    for column in (
        "layout",
        "generation",
        "chunk_vectors",
        "index",
        "cache",
        "all on disk",
        "export",
    ):
        table.add_column(column, justify="left" if column == "layout" else "right")
    for name, sizes in rows.items():
        sizes["all"] = sizes["generation"] + sizes["index"] + sizes["cache"]
        table.add_row(
            name,
            *(
                f"{sizes[k] / MiB:.1f}"
                for k in ("generation", "chunk_vectors", "index", "cache", "all", "export")
            ),
        )
    console.print(table)
    console.print(f"export (with the vectors read from the index): {export_s:.1f} s")
    result = {
        "source": "jawiki excerpt",
        "vectors": int(meta["vector_count"]),
        "dim": int(meta["embedding_dim"]),
        "unit_chars": meta.get("embedding_unit_chars"),
        "bytes": rows,
        "export_seconds": round(export_s, 2),
    }
    out = HERE / "results" / "vector_storage.json"
    out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    console.print(f"wrote {out}")
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
