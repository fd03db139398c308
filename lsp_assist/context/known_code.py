"""Which files a code model has read verbatim: the running Python's standard library.

Owns :class:`KnownCode`, the test the related and similar layers apply to another
file before they quote it (setting ``layerStandardLibrary``). Qwen2.5-Coder was trained
on the standard library many times over; quoting its definitions in the prompt made the
0.5B copy their names instead of writing the call it knows (docs/context.md,
"Other-file blocks from the standard library"). A file counts as the standard library
when it lies under the running interpreter's ``stdlib`` folder or is a byte-identical
copy of a file there at the same relative path (a workspace holding a copy of it).
"""

from __future__ import annotations

import sysconfig
from pathlib import Path

from lsp_assist.config import Bounded

MAX_DEPTH = 5
"""The most trailing path parts tried against the standard library's folder."""


def stdlib_root() -> Path:
    """Return the running interpreter's standard library folder, resolved."""
    return Path(sysconfig.get_paths()["stdlib"]).resolve()


KNOWN_FILES = 4096
"""Files whose standard-library verdict is kept (emptied when full)."""


class KnownCode:
    """Answers whether a file is (a copy of) the standard library; cached per path and mtime."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root if root is not None else stdlib_root()
        self._seen: dict[Path, tuple[int, bool]] = {}

    def bounds(self) -> dict[str, Bounded]:
        """The verdicts kept against ``KNOWN_FILES``."""
        return {
            "known_code.files": Bounded(
                len(self._seen), KNOWN_FILES, "files", "context/known_code.py KNOWN_FILES"
            )
        }

    def is_stdlib(self, path: Path) -> bool:
        """True when ``path`` is a standard library file or a byte-identical copy of one."""
        try:
            stat = path.stat()
        except OSError:
            return False
        seen = self._seen.get(path)
        if seen is not None and seen[0] == stat.st_mtime_ns:
            return seen[1]
        known = self._check(path, stat.st_size)
        if path not in self._seen and len(self._seen) >= KNOWN_FILES:
            self._seen.clear()
        self._seen[path] = (stat.st_mtime_ns, known)
        return known

    def _check(self, path: Path, size: int) -> bool:
        resolved = path.resolve()
        if resolved.is_relative_to(self.root):
            return True
        parts = resolved.parts
        for depth in range(1, min(MAX_DEPTH, len(parts) - 1) + 1):
            twin = self.root.joinpath(*parts[-depth:])
            try:
                if twin.stat().st_size != size:
                    continue
                return twin.read_bytes() == resolved.read_bytes()
            except OSError:
                continue
        return False
