"""The packaged embedding model: converted to GGUF, run by llama.cpp, checked against numpy.

The reference is all-MiniLM-L6-v2's forward pass written out in float64 numpy from the
same safetensors (embeddings, 6 post-norm encoder layers, mean pooling): the GGUF
conversion (tensor names, token spelling, hyper-parameters) is right only if llama.cpp's
vectors agree with it.
"""

from __future__ import annotations

import functools
import math
import time
import zipfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("llama_cpp")
pytest.importorskip("all_minilm_l6_v2")

from lsp_assist.backends.embedding import (
    Embedder,
    _minilm_zip,
    _read_safetensors,
    minilm_gguf_path,
)
from lsp_assist.index.vectors import VectorIndex
from tests.support.workspace import scanned_index


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    """The packaged model (converted into the user cache once)."""
    model = Embedder(minilm_gguf_path(), threads=1)
    yield model
    model.close()


def _ln(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-12) * w + b


@functools.cache
def _weights() -> dict[str, np.ndarray]:
    with zipfile.ZipFile(_minilm_zip()) as zf:
        return {
            k: v.astype(np.float64)
            for k, v in _read_safetensors(zf.read("model.safetensors")).items()
        }


def _reference(ids: list[int]) -> np.ndarray:
    t = _weights()
    n = len(ids)
    emb = "embeddings."
    x = (
        t[emb + "word_embeddings.weight"][ids]
        + t[emb + "position_embeddings.weight"][:n]
        + t[emb + "token_type_embeddings.weight"][0]
    )
    x = _ln(x, t[emb + "LayerNorm.weight"], t[emb + "LayerNorm.bias"])
    erf = np.vectorize(math.erf)
    for layer in range(6):
        p = f"encoder.layer.{layer}."

        def lin(h: np.ndarray, name: str, p: str = p) -> np.ndarray:
            return h @ t[p + name + ".weight"].T + t[p + name + ".bias"]

        def heads(h: np.ndarray) -> np.ndarray:
            return h.reshape(n, 12, 32).transpose(1, 0, 2)

        q = heads(lin(x, "attention.self.query"))
        k = heads(lin(x, "attention.self.key"))
        v = heads(lin(x, "attention.self.value"))
        a = q @ k.transpose(0, 2, 1) / math.sqrt(32)
        a = np.exp(a - a.max(-1, keepdims=True))
        a /= a.sum(-1, keepdims=True)
        o = (a @ v).transpose(1, 0, 2).reshape(n, 384)
        x = _ln(
            lin(o, "attention.output.dense") + x,
            t[p + "attention.output.LayerNorm.weight"],
            t[p + "attention.output.LayerNorm.bias"],
        )
        h = lin(x, "intermediate.dense")
        h = 0.5 * h * (1 + erf(h / math.sqrt(2)))
        x = _ln(
            lin(h, "output.dense") + x,
            t[p + "output.LayerNorm.weight"],
            t[p + "output.LayerNorm.bias"],
        )
    mean = x.mean(0)
    return mean / np.linalg.norm(mean)


def test_tokenizer_is_bert_uncased_wordpiece(embedder: Embedder) -> None:
    assert embedder.tokens("hello world") == [101, 7592, 2088, 102]
    ids = embedder.tokens("def compute_checksum(data):")
    assert ids[0] == 101 and ids[-1] == 102 and 1035 in ids  # "_"
    long = embedder.tokens("word " * 500)
    assert len(long) == embedder.max_tokens and long[-1] == 102


def test_vectors_match_the_numpy_reference(embedder: Embedder) -> None:
    texts = [
        "compute the checksum of a byte string",
        "def compute_checksum(data):\n    total = 17\n    for byte in data:\n"
        "        total = (total * 31 + byte) % 65521",
        "class Point:\n    '''A point on the map.'''",
    ]
    vectors = embedder.embed(texts)
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    for text, row in zip(texts, vectors, strict=True):
        assert float(_reference(embedder.tokens(text)) @ row) > 0.999
    # one text alone and in a batch of many: the same vector
    many = embedder.embed(texts * 7)
    assert np.allclose(many[:3], vectors, atol=1e-4)


def test_converted_file_is_reused(tmp_path: Path) -> None:
    first = minilm_gguf_path(tmp_path)
    mtime = first.stat().st_mtime_ns
    assert minilm_gguf_path(tmp_path) == first and first.stat().st_mtime_ns == mtime


def test_threshold_drops_unrelated_chunks(tmp_path: Path, embedder: Embedder) -> None:
    files = {
        "app/checksum.py": (
            "def compute_checksum(data):\n"
            '    """Return the rolling checksum of data."""\n'
            "    total = 17\n"
            "    for byte in data:\n"
            "        total = (total * 31 + byte) % 65521\n"
            "    return total\n"
        ),
        "app/weather.py": (
            "def forecast_rain(city):\n"
            '    """Probability of rain tomorrow in a city."""\n'
            "    return clouds(city) * humidity(city)\n"
        ),
        "app/colors.py": (
            "PALETTE = {'red': '#f00'}\n\n\n"
            "def lighten(color, amount):\n"
            "    return mix(color, '#fff', amount)\n"
        ),
    }
    index = scanned_index(tmp_path / "ws", files)
    vectors = VectorIndex(index, lambda: embedder, model_id="minilm")
    vectors.sync()
    query = vectors.embed_query(
        "    payload = packet.body\n    crc = checksum of the payload bytes"
    )
    assert query is not None
    hits = vectors.search(query, limit=5, threshold=0.35)
    assert [h.span.label for h in hits] == ["compute_checksum"]
    every = vectors.search(query, limit=5, threshold=-1.0)
    assert len(every) == 3 and all(h.score < 0.35 for h in every[1:])  # scored, under the bar


class CountingEmbedder(Embedder):
    """The packaged model, keeping every text it is asked to embed."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, threads=1)
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Note the texts, then embed them."""
        self.texts.extend(texts)
        return super().embed(texts)


def test_a_change_on_disk_is_re_embedded_by_the_packaged_model(tmp_path: Path) -> None:
    files = {
        "app/weather.py": (
            "def forecast_rain(city):\n"
            '    """Probability of rain tomorrow in a city."""\n'
            "    return clouds(city) * humidity(city)\n"
        ),
        "app/checksum.py": (
            "def compute_checksum(data):\n"
            "    total = 17\n"
            "    for byte in data:\n"
            "        total = (total * 31 + byte) % 65521\n"
            "    return total\n"
        ),
    }
    index = scanned_index(tmp_path / "ws", files, watch=True)
    assert index.start_watching()
    made: list[CountingEmbedder] = []

    def load() -> CountingEmbedder:
        made.append(CountingEmbedder(minilm_gguf_path()))
        return made[-1]

    vectors = VectorIndex(index, load, model_id="minilm")
    try:
        vectors.start()
        assert vectors.ready.wait(30)
        model = made[0]
        assert len(model.texts) == 2
        model.texts.clear()
        weather = tmp_path / "ws" / "app" / "weather.py"
        weather.write_text(
            files["app/weather.py"] + "\n\n"
            "def wind_speed(city):\n"
            '    """Wind speed in km/h in a city, from the pressure gradient."""\n'
            "    return gradient(city) * 3.6\n"
        )
        started = time.monotonic()
        while not model.texts and time.monotonic() - started < 10:
            time.sleep(0.01)
        took = time.monotonic() - started
        while vectors.stats.chunks < 3 and time.monotonic() - started < 10:
            time.sleep(0.01)
        assert took < 3.0, took
        # forecast_rain kept its vector: only the new definition was embedded
        assert len(model.texts) == 1 and model.texts[0].startswith("app/weather.py wind_speed\n")
        query = vectors.embed_query("how fast does the wind blow in the city (km/h)")
        assert query is not None
        hits = vectors.search(query, limit=3, threshold=0.3)
        assert hits and hits[0].span.label == "wind_speed"
    finally:
        vectors.stop()
        index.stop()
