"""Write a deterministic synthetic Python workspace for index load tests (a script).

Usage: .venv/bin/python benchmarks/gen_tree.py [--files 50000] [--out /tmp/lsp-tree-50k]

Every file is about 5 KB of plausible Python: a docstring, imports of three other
modules of the tree (so the import graph is real), constants, two classes with methods
and a handful of functions, names drawn from a fixed vocabulary. The same arguments
always write the same bytes (``random.Random(seed)``); an existing tree with a matching
stamp file is kept.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

WORDS = (  # noqa: SIM905
    "order item cart price total tax user account invoice ship address payment card "
    "refund discount coupon stock warehouse product catalog review rating session token "
    "cache queue event handler request response client server record batch report export "
    "import schedule job task worker retry limit window buffer stream chunk frame packet "
    "route path node edge graph tree leaf branch merge split filter map reduce sort index "
    "key value field column table row query plan cost budget metric sample trace span log"
).split()
PER_DIR = 100
FILE_BYTES = 5000


def _name(rng: random.Random, parts: int = 2) -> str:
    return "_".join(rng.choice(WORDS) for _ in range(parts))


def _camel(rng: random.Random) -> str:
    return "".join(w.capitalize() for w in _name(rng, 2).split("_"))


def module_path(i: int) -> str:
    """Return the dotted module name of file number ``i``."""
    return f"pkg{i // PER_DIR // 50:02d}.sub{i // PER_DIR:04d}.mod{i:05d}"


def _function(rng: random.Random, indent: str, method: bool) -> str:
    name = _name(rng, rng.choice((2, 3)))
    args = [_name(rng, 1) + str(k) for k in range(rng.randint(1, 3))]
    params = ", ".join((["self"] if method else []) + [f"{a}: int" for a in args])
    body = [
        f"{indent}def {name}({params}) -> int:",
        f'{indent}    """Return the {" ".join(name.split("_"))} of the given values."""',
        f"{indent}    result = 0",
    ]
    for a in args:
        body.append(f"{indent}    if {a} > {rng.randint(1, 99)}:")
        body.append(f"{indent}        result += {a} * {rng.randint(2, 9)}")
        body.append(f"{indent}    else:")
        body.append(f"{indent}        result -= {rng.randint(1, 50)}")
    body.append(f"{indent}    for step in range({rng.randint(2, 20)}):")
    body.append(f"{indent}        result = (result + step) % {rng.randint(100, 1000)}")
    body.append(f"{indent}    return result")
    return "\n".join(body) + "\n"


def file_text(i: int, total: int) -> str:
    """Return the text of file number ``i`` of a tree of ``total`` files."""
    rng = random.Random(i * 7919 + 17)
    lines = [f'"""Module {i}: {" ".join(_name(rng, 3).split("_"))} helpers."""', ""]
    for _ in range(3):
        other = rng.randrange(total)
        if other != i:
            lines.append(f"from {module_path(other)} import {_name(rng, 2)}")
    lines.append("")
    for _ in range(3):
        lines.append(f"{_name(rng, 2).upper()} = {rng.randint(0, 10_000)}")
    lines.append("")
    text = "\n".join(lines) + "\n"
    while len(text) < FILE_BYTES - 400:
        if rng.random() < 0.3:
            cls = f'\n\nclass {_camel(rng)}:\n    """A {" ".join(_name(rng, 2).split("_"))}."""\n\n'
            cls += "\n".join(_function(rng, "    ", True) for _ in range(rng.randint(2, 4)))
            text += cls
        else:
            text += "\n\n" + _function(rng, "", False)
    return text


def write_tree(out: Path, files: int) -> Path:
    """Write the tree under ``out`` (kept when already complete) and return it."""
    stamp = out / ".generated"
    if stamp.exists() and stamp.read_text() == str(files):
        return out
    for i in range(files):
        rel = Path(*module_path(i).split("."))
        target = out / rel.with_suffix(".py")
        if i % PER_DIR == 0:
            target.parent.mkdir(parents=True, exist_ok=True)
            for parent in (target.parent, target.parent.parent):
                (parent / "__init__.py").touch()
        target.write_text(file_text(i, files))
    stamp.write_text(str(files))
    return out


def main() -> None:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=50_000)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    out = args.out or Path(f"/tmp/lsp-tree-{args.files}")
    write_tree(out, args.files)
    print(out)


if __name__ == "__main__":
    main()
