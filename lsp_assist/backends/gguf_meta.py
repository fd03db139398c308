"""Read and validate a GGUF file's header without loading it into llama.cpp.

llama.cpp reports a bad file with log lines and a NULL pointer (and some corrupt files
can crash it), so every model path is checked here first: the magic, the version, the
metadata table, the tensor table, and that the file is long enough to hold every
tensor the table names (a truncated download is the commonest corruption). Array
values are summarised by their length; scalars and strings are kept.
"""

from __future__ import annotations

import functools
import mmap
import struct
from dataclasses import dataclass, field
from pathlib import Path

from lsp_assist.errors import ModelLoadError

GGUF_MAGIC = b"GGUF"

# GGUF value types
_U8, _I8, _U16, _I16, _U32, _I32, _F32, _BOOL, _STR, _ARR, _U64, _I64, _F64 = range(13)
_LENGTH = struct.Struct("<Q")
_SCALAR_FMT = {
    _U8: "<B",
    _I8: "<b",
    _U16: "<H",
    _I16: "<h",
    _U32: "<I",
    _I32: "<i",
    _F32: "<f",
    _BOOL: "<?",
    _U64: "<Q",
    _I64: "<q",
    _F64: "<d",
}

Scalar = int | float | bool | str


@dataclass(frozen=True)
class ArrayValue:
    """A metadata array, summarised: its element type and length."""

    item_type: int
    length: int


@dataclass
class GGUFHeader:
    """What the header of a GGUF file says."""

    path: Path
    version: int
    tensor_count: int
    metadata: dict[str, Scalar | ArrayValue] = field(default_factory=dict)
    data_offset: int = 0
    required_size: int = 0
    file_size: int = 0

    @property
    def architecture(self) -> str:
        """Return ``general.architecture`` ('' when absent)."""
        value = self.metadata.get("general.architecture", "")
        return value if isinstance(value, str) else ""

    def get_int(self, key: str) -> int | None:
        """Return an integer metadata value, or None."""
        value = self.metadata.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        return None


class _Reader:
    def __init__(self, buf: mmap.mmap | bytes, path: Path) -> None:
        self.buf = buf
        self.pos = 0
        self.path = path

    def need(self, n: int) -> None:
        if self.pos + n > len(self.buf):
            raise ModelLoadError(
                f"{self.path} is truncated or corrupt: the GGUF header runs past the end "
                f"of the file (offset {self.pos + n} > {len(self.buf)} bytes)"
            )

    def unpack(self, fmt: str) -> Scalar:
        size = struct.calcsize(fmt)
        self.need(size)
        (value,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += size
        return value  # type: ignore[no-any-return]

    def u32(self) -> int:
        return int(self.unpack("<I"))

    def u64(self) -> int:
        return int(self.unpack("<Q"))

    def string(self) -> str:
        length = self.u64()
        if length > 1 << 24:
            raise ModelLoadError(f"{self.path} is corrupt: a GGUF string claims {length} bytes")
        self.need(length)
        raw = bytes(self.buf[self.pos : self.pos + length])
        self.pos += length
        return raw.decode("utf-8", errors="replace")

    def skip_string(self) -> None:
        self.skip_strings(1)

    def skip_strings(self, count: int) -> None:
        # a vocabulary is an array of ~150,000 strings: one tight loop, not calls per item
        buf, pos, end = self.buf, self.pos, len(self.buf)
        length_at = _LENGTH.unpack_from
        for _ in range(count):
            if pos + 8 > end:
                self.pos = pos
                self.need(8)
            pos += 8 + length_at(buf, pos)[0]
        self.pos = pos
        self.need(0)

    def value(self, vtype: int) -> Scalar | ArrayValue:
        if vtype in _SCALAR_FMT:
            return self.unpack(_SCALAR_FMT[vtype])
        if vtype == _STR:
            return self.string()
        if vtype == _ARR:
            item_type = self.u32()
            length = self.u64()
            if item_type == _STR:
                self.skip_strings(length)
            elif item_type in _SCALAR_FMT:
                size = struct.calcsize(_SCALAR_FMT[item_type]) * length
                self.need(size)
                self.pos += size
            else:
                raise ModelLoadError(
                    f"{self.path} is corrupt: unsupported GGUF array type {item_type}"
                )
            return ArrayValue(item_type, length)
        raise ModelLoadError(f"{self.path} is corrupt: unknown GGUF value type {vtype}")


def _tensor_nbytes(ggml_type: int, dims: list[int]) -> int | None:
    """Return the byte size of a tensor, or None when the type is unknown to ``gguf``."""
    try:
        from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

        block_size, type_size = GGML_QUANT_SIZES[GGMLQuantizationType(ggml_type)]
    except (ImportError, KeyError, ValueError):
        return None
    count = 1
    for d in dims:
        count *= d
    return (count // block_size) * type_size


def read_gguf_header(path: str | Path) -> GGUFHeader:
    """Parse and validate the header of the GGUF at ``path``; raise ModelLoadError if unusable.

    The result is kept per (path, size, mtime): a load reads it for the memory check and
    again for the vocabulary, and a vocabulary's strings take a second to walk in Python.
    Treat the returned header as read-only.
    """
    path = Path(path).expanduser()
    if not path.exists():
        raise ModelLoadError(f"model file not found: {path}")
    if not path.is_file():
        raise ModelLoadError(f"model path is not a file: {path}")
    stat = path.stat()
    file_size = stat.st_size
    if file_size < 24:
        raise ModelLoadError(f"{path} is not a GGUF model (only {file_size} bytes)")
    return _read_header(str(path), file_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=8)
def _read_header(name: str, file_size: int, _mtime_ns: int) -> GGUFHeader:
    """The header of one version of a file (the size and mtime name the version)."""
    path = Path(name)
    try:
        with path.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            return _parse(buf, path, file_size)
    except OSError as exc:
        raise ModelLoadError(f"cannot read model file {path}: {exc}") from exc


def _parse(buf: mmap.mmap, path: Path, file_size: int) -> GGUFHeader:
    magic = bytes(buf[:4])
    if magic != GGUF_MAGIC:
        raise ModelLoadError(
            f"{path} is not a GGUF model (file starts with {magic!r}, expected b'GGUF'); "
            "convert it with llama.cpp's convert_hf_to_gguf.py or download a .gguf file"
        )
    reader = _Reader(buf, path)
    reader.pos = 4
    version = reader.u32()
    if version not in (2, 3):
        raise ModelLoadError(f"{path} has unsupported GGUF version {version} (need 2 or 3)")
    tensor_count = reader.u64()
    kv_count = reader.u64()
    if tensor_count > 1 << 20 or kv_count > 1 << 20:
        raise ModelLoadError(f"{path} is corrupt: implausible GGUF counts")
    header = GGUFHeader(path=path, version=version, tensor_count=tensor_count, file_size=file_size)
    for _ in range(kv_count):
        key = reader.string()
        vtype = reader.u32()
        header.metadata[key] = reader.value(vtype)
    tensors: list[tuple[int, int | None]] = []
    for _ in range(tensor_count):
        reader.skip_string()
        n_dims = reader.u32()
        if n_dims > 8:
            raise ModelLoadError(f"{path} is corrupt: a tensor has {n_dims} dimensions")
        dims = [reader.u64() for _ in range(n_dims)]
        ggml_type = reader.u32()
        offset = reader.u64()
        tensors.append((offset, _tensor_nbytes(ggml_type, dims)))
    alignment = header.get_int("general.alignment") or 32
    data_offset = reader.pos + (-reader.pos % alignment)
    header.data_offset = data_offset
    required = data_offset
    for offset, nbytes in tensors:
        if nbytes is not None:
            required = max(required, data_offset + offset + nbytes)
    header.required_size = required
    if required > file_size:
        raise ModelLoadError(
            f"{path} is truncated or corrupt: its tensors need {required} bytes but the file "
            f"has {file_size}; download it again"
        )
    return header
