"""The tests' own layout (tests/README.md): helpers live in tests/support or the lab, never in a test
module another imports; test folders hold tests only; bench/ is a client of the product and the lab.

lint-imports keeps the test folders independent of each other (pyproject.toml); what a contract
cannot name -- "any test_* module", a relative import inside one folder, a ``sys.path`` edit -- is
read here from the sources themselves."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TESTS = REPO / "tests"
BENCH = REPO / "bench"
LAB = REPO / "lab"


def _modules(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path, source: str | None = None) -> Iterator[tuple[int, str]]:
    """Every module ``path`` imports (relative imports resolved), with its line; ``source`` stands in
    for the file's text."""
    text = path.read_text(encoding="utf-8") if source is None else source
    tree = ast.parse(text, filename=str(path))
    package = _module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            for alias in node.names:
                # `from . import test_x` names a module; `from .m import f` names a module and a member
                yield node.lineno, module if node.module else f"{module}.{alias.name}"


def _is_test_module_itself(name: str) -> bool:
    last = name.rsplit(".", 1)[-1]
    return name.startswith("tests.") and (last.startswith("test_") or last == "conftest")


def test_no_module_imports_a_test_module() -> None:
    bad = [
        f"{p.relative_to(REPO)} l.{line}: {name}"
        for p in _modules(TESTS)
        for line, name in imported(p)
        if _is_test_module_itself(name)
    ]
    assert not bad, f"test modules imported (move the helper to tests/support): {bad}"


def test_test_folders_hold_tests_only() -> None:
    """A module in a test folder is a test module, a conftest or a package marker; helpers go to
    tests/support (or the lab, when a bench uses them too)."""
    helpers = [
        str(p.relative_to(REPO))
        for p in _modules(TESTS)
        if p.parent != TESTS
        and p.relative_to(TESTS).parts[0].startswith("test_")
        and not (p.name.startswith("test_") or p.name in {"conftest.py", "__init__.py"})
    ]
    assert not helpers, helpers


@pytest.mark.parametrize("root", [BENCH, LAB], ids=["bench", "lab"])
def test_bench_and_lab_import_nothing_of_tests(root: Path) -> None:
    bad = [
        f"{p.relative_to(REPO)} l.{line}: {name}"
        for p in _modules(root)
        for line, name in imported(p)
        if name == "tests" or name.startswith("tests.")
    ]
    assert not bad, bad


def test_bench_edits_no_sys_path() -> None:
    """Benches run as ``python -m bench.x`` from the checkout, with the installed packages."""
    bad = []
    for p in _modules(BENCH):
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Attribute)
                and node.attr == "path"
                and isinstance(node.value, ast.Name)
                and node.value.id == "sys"
            ):
                bad.append(f"{p.relative_to(REPO)} l.{node.lineno}")
    assert not bad, bad


def test_the_import_reader_sees_what_the_rules_forbid() -> None:
    """The rules above can fail: the reader resolves each import form they forbid."""
    probe = TESTS / "test_streaming" / "test_serving" / "probe.py"
    source = "\n".join(
        [
            "from .test_api import x",
            "from . import test_store",
            "from tests.test_state.conftest import y",
            "import tests.test_live.test_lag_live",
            "from tests.support.http import get",
            "from ..test_pipeline.test_adapter import z",
        ]
    )
    names = [name for _, name in imported(probe, source)]
    assert [n for n in names if _is_test_module_itself(n)] == [
        "tests.test_streaming.test_serving.test_api",
        "tests.test_streaming.test_serving.test_store",
        "tests.test_state.conftest",
        "tests.test_live.test_lag_live",
        "tests.test_streaming.test_pipeline.test_adapter",
    ]


def test_the_products_runtime_dependencies_are_what_it_imports() -> None:
    """pyproject's ``dependencies`` name exactly the distributions the product's modules import (the
    lab and the tests declare their own): nothing the wheel drags along unused, nothing it needs
    that only a test environment happens to have."""
    import importlib.metadata
    import re
    import sys
    import tomllib

    product = ("decoders", "state", "streaming", "dashboards", "helm")
    imported_names: set[str] = set()
    for root in product:
        for path in _modules(REPO / root):
            imported_names |= {name.split(".")[0] for _, name in imported(path)}
    third_party = {
        n for n in imported_names if n not in sys.stdlib_module_names and n not in {*product, "__future__"}
    }
    by_import = importlib.metadata.packages_distributions()

    def normal(name: str) -> str:
        return re.sub(r"[-_.]+", "-", name).lower()

    used = {normal(d) for n in third_party for d in by_import.get(n, [n])}
    specs = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    declared = {normal(re.split(r"[<>=!~\[; ]", d, maxsplit=1)[0]) for d in specs}
    assert declared == used, {
        "declared, not imported": declared - used,
        "imported, not declared": used - declared,
    }


def test_architectures_thread_table_names_every_thread_the_product_starts() -> None:
    """ARCHITECTURE.md's "Threads" table against the thread names in the product: every
    ``mirror-*`` name a module gives a thread (a literal, or a side query's ``mirror-<name>``) has a
    row, and every row names such a thread."""
    import re

    from streaming.pipeline.share_state import ShareStateQuery

    named: set[str] = set()
    for path in _modules(REPO / "streaming"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and re.fullmatch(r"mirror-[a-z][a-z-]*[a-z]", node.value)
            ):
                named.add(node.value)
            # a name made per cluster: f"mirror-cluster-{name}" -> mirror-cluster-<name>
            if (
                isinstance(node, ast.JoinedStr)
                and len(node.values) == 2
                and isinstance(node.values[0], ast.Constant)
                and re.fullmatch(r"mirror-[a-z][a-z-]*-", str(node.values[0].value))
            ):
                named.add(f"{node.values[0].value}<name>")
    # side queries are supervised on ``mirror-<name>`` (`streaming.app.supervisor.SideQuerySupervisor`)
    named |= {f"mirror-{q.name.replace('_', '-')}" for q in (ShareStateQuery,)}
    text = (REPO / "ARCHITECTURE.md").read_text(encoding="utf-8")
    table = text.split("## Threads", 1)[1].split("\n## ", 1)[0]
    rows = {m for m in re.findall(r"^\| `(mirror-[a-z-]+(?:<name>)?)` \|", table, flags=re.MULTILINE)}
    assert rows == named, {"threads without a row": named - rows, "rows without a thread": rows - named}


# ------------------------------------------------------------------------ tests mirror the product
#: The product's packages; a module ``<package>/a/b.py`` has its unit tests in
#: ``tests/test_<package>/test_a/test_b.py`` (more of them may follow in ``test_b_<topic>.py``).
PRODUCT = ("decoders", "state", "streaming", "dashboards", "helm")

_CHART = "the chart (helm/coordinator-mirror/: templates and values, not Python) and the image it runs"

#: The one list of what does not follow the rule, each with its reason: modules without a test file
#: at their mirrored path, and test files in a mirrored folder that name no module.  Keep it short:
#: the point is that a module's tests are found by its path.
UNMIRRORED: dict[str, str] = {
    "*/__init__.py": "package markers and re-exports: each name is tested where it is defined",
    "tests/test_helm/test_alerting.py": _CHART,
    "tests/test_helm/test_assets.py": _CHART,
    "tests/test_helm/test_chart.py": _CHART,
    "tests/test_helm/test_image.py": _CHART,
    "tests/test_helm/test_pod.py": _CHART,
    "tests/test_streaming/test_pipeline/test_spark_workarounds.py": "Spark's own behaviours the pipeline "
    "works around (in session, source, recovery, worker_tune): each test fails once Spark fixes one",
}


def _unmirrored(path: Path) -> bool:
    import fnmatch

    rel = str(path.relative_to(REPO))
    return any(fnmatch.fnmatch(rel, pattern) for pattern in UNMIRRORED)


def mirrored_test(module: Path) -> Path:
    """``streaming/serving/store.py`` -> ``tests/test_streaming/test_serving/test_store.py``."""
    return TESTS.joinpath(*(f"test_{part}" for part in module.relative_to(REPO).parts))


def mirrored_module(test: Path) -> Path:
    """The module a test file's path names: the inverse of `mirrored_test`."""
    return REPO.joinpath(*(part.removeprefix("test_") for part in test.relative_to(TESTS).parts))


def _product_modules() -> list[Path]:
    return [p for root in PRODUCT for p in _modules(REPO / root)]


def _names_module(test: Path, module: Path) -> bool:
    """Whether ``test`` imports ``module`` (``import m``, ``from m import x``, ``from pkg import m``)."""
    name = _module_name(module)
    tree = ast.parse(test.read_text(encoding="utf-8"), filename=str(test))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        else:
            continue
        if any(n == name or n.startswith(name + ".") for n in names):
            return True
    return False


def unmirrored_modules() -> list[str]:
    """Each product module without its mirrored test file, or whose file does not import it."""
    bad = []
    for module in _product_modules():
        if _unmirrored(module):
            continue
        test = mirrored_test(module)
        if not test.is_file():
            bad.append(f"{module.relative_to(REPO)}: no {test.relative_to(REPO)}")
        elif not _names_module(test, module):
            bad.append(f"{module.relative_to(REPO)}: {test.relative_to(REPO)} does not import it")
    return bad


def orphan_tests() -> list[str]:
    """Each test file in a mirrored folder that names no module there: ``test_<m>.py`` or
    ``test_<m>_<topic>.py`` for a module ``<m>.py`` of the folder it mirrors."""
    bad = []
    for root in PRODUCT:
        for test in _modules(TESTS / f"test_{root}"):
            if not test.name.startswith("test_") or _unmirrored(test):
                continue
            module = mirrored_module(test)
            folder = module.parent
            siblings = {p.stem for p in folder.glob("*.py")} if folder.is_dir() else set()
            stem = module.stem
            if not any(stem == m or stem.startswith(m + "_") for m in siblings - {"__init__"}):
                bad.append(f"{test.relative_to(REPO)}: no {module.relative_to(REPO)} (nor one it extends)")
    return bad


def test_every_module_has_its_tests_at_its_mirrored_path() -> None:
    """A newcomer finds a module's unit tests by its path; behaviour across the rooms lives in the
    behaviour folders (test_live, test_reliability, test_security, test_lab, test_docs)."""
    bad = unmirrored_modules()
    assert not bad, "\n".join(["modules without their mirrored tests (tests/README.md):", *bad])


def test_every_test_file_in_a_mirrored_folder_names_a_module() -> None:
    """A module renamed or removed takes its test file's name with it."""
    bad = orphan_tests()
    assert not bad, "\n".join(["test files naming no module (rename them with it):", *bad])


def test_the_exception_list_names_what_exists() -> None:
    """Every entry of `UNMIRRORED` still matches a file: a stale exception hides nothing."""
    import fnmatch

    files = [str(p.relative_to(REPO)) for p in [*_product_modules(), *_modules(TESTS)]]
    stale = [pattern for pattern in UNMIRRORED if not fnmatch.filter(files, pattern)]
    assert not stale, stale


def test_the_mirror_rules_can_fail() -> None:
    """The path mapping both ways, and the import check, on this repository's own files."""
    store = REPO / "streaming" / "serving" / "store.py"
    assert mirrored_test(store) == TESTS / "test_streaming" / "test_serving" / "test_store.py"
    assert mirrored_module(mirrored_test(store)) == store
    assert _names_module(mirrored_test(store), store)
    assert not _names_module(mirrored_test(store), REPO / "streaming" / "lifecycle.py")
