"""A ZIM file's directory read directly: which cluster holds each entry, which libzim's Python
binding does not say.

Why (design.md §35.17): libzim decompresses a whole cluster (a few MB of pages) to return one
entry and keeps recent clusters in a process-wide cache. Entry ids run in path order, clusters
in the order the writer added the pages, so reading a file's articles by id jumps from cluster
to cluster: the cache either holds most of the file (measured: 71 MiB of memory for 64,000
articles at libzim's default bound, which is a quarter of what it really holds) or decompresses
a cluster per article (77 s instead of 0.7 s for the same file with a one-cluster cache). Read
in cluster order, each cluster is decompressed once and one cluster is all the cache needs.

The layout read here is the ZIM format's (openzim.org, major versions 5 and 6, little-endian):
a header whose ``pathPtrPos`` points to one 8-byte offset per entry in path order, and at each
offset a directory entry — mimetype (2 bytes; 0xffff a redirect), parameter length (1),
namespace (1), revision (4), then the cluster number (4) and blob number (4) of an entry with
content.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    # libzim ships .pyi files but no py.typed marker: to mypy these are Any
    from libzim.reader import Archive

MAGIC = 72173914
HEADER = struct.Struct("<IHH16sIIQQQQIIQ")  # magic … checksumPos: 80 bytes
REDIRECT, LINK_TARGET, DELETED = 0xFFFF, 0xFFFE, 0xFFFD
NO_CLUSTER = 0xFFFFFFFF  # sorts a redirect or a damaged entry last


def cluster_order(path: Path, archive: Archive, ids: Sequence[int]) -> np.ndarray | None:
    """``ids`` (libzim entry ids) sorted by the cluster that holds each, then by id; None when
    the file cannot be read this way (split in parts, another layout, paths that do not agree
    with libzim's), and the caller reads in id order."""
    if archive.is_multipart:
        return None
    with path.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as view:
        directory = Directory.read(view)
        start = directory.user_start(archive) if directory is not None else None
        if directory is None or start is None:
            return None
        wanted = np.asarray(ids, dtype=np.uint64)
        clusters = np.fromiter(
            (directory.cluster(start + int(i)) for i in wanted), dtype=np.uint64, count=len(wanted)
        )
    keys = (clusters << np.uint64(32)) | wanted
    keys.sort()
    return (keys & np.uint64(0xFFFFFFFF)).astype(np.uint32)


class Directory:
    """The directory entries of a mapped ZIM file, by their index in path order."""

    def __init__(self, view: mmap.mmap, path_ptrs: int, count: int) -> None:
        self.view, self.path_ptrs, self.count = view, path_ptrs, count

    @classmethod
    def read(cls, view: mmap.mmap) -> Directory | None:
        if len(view) < HEADER.size:
            return None
        magic, major, _minor, _uuid, count, _clusters, path_ptrs, *_ = HEADER.unpack_from(view)
        if magic != MAGIC or major not in (5, 6) or path_ptrs + 8 * count > len(view):
            return None
        return cls(view, path_ptrs, count)

    def user_start(self, archive: Archive) -> int | None:
        """The index of libzim's entry id 0: 0 in the old namespace scheme (every entry is the
        user's); in the new one, the first entry of namespace ``C`` (entries are sorted by
        namespace, then path). None when sampled paths do not agree with libzim's."""
        start = self._first_of_namespace(b"C") if archive.has_new_namespace_scheme else 0
        if start + archive.entry_count > self.count:
            return None
        samples = {0, archive.entry_count // 2, archive.entry_count - 1} - {-1}
        for i in samples:
            if self.path(start + i) != archive._get_entry_by_id(i).path:
                return None
        return start

    def cluster(self, index: int) -> int:
        offset = self._offset(index)
        if offset + 16 > len(self.view):
            return NO_CLUSTER
        mimetype, _params, _ns, _revision, cluster = struct.unpack_from("<HBcII", self.view, offset)
        return NO_CLUSTER if mimetype in (REDIRECT, LINK_TARGET, DELETED) else cluster

    def path(self, index: int) -> str:
        """The entry's path as libzim's Python binding gives it: ``A/Ray_Charles`` in the old
        scheme, without the ``C/`` in the new one."""
        offset = self._offset(index)
        (mimetype,) = struct.unpack_from("<H", self.view, offset)
        namespace = self._namespace(index).decode("ascii", "replace")
        start = offset + (12 if mimetype == REDIRECT else 16)
        url = self.view[start : self.view.find(b"\0", start)].decode("utf-8", "replace")
        return url if namespace == "C" else f"{namespace}/{url}"

    def _offset(self, index: int) -> int:
        if not 0 <= index < self.count:
            raise IndexError(index)
        (offset,) = struct.unpack_from("<Q", self.view, self.path_ptrs + 8 * index)
        return offset

    def _namespace(self, index: int) -> bytes:
        offset = self._offset(index)
        return self.view[offset + 3 : offset + 4]

    def _first_of_namespace(self, namespace: bytes) -> int:
        low, high = 0, self.count
        while low < high:
            middle = (low + high) // 2
            if self._namespace(middle) < namespace:
                low = middle + 1
            else:
                high = middle
        return low
