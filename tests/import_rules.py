"""The import rules of the design page, read from the source with ``ast``.

Every ``import`` and ``from ... import`` in a module counts, also those inside functions and under
``TYPE_CHECKING``, and so does ``importlib.import_module``: called with a literal name, it imports that module;
with an f-string that is a package's name (written out or ``__name__``) and one computed last part, such as
``f"{__name__}.{name}"``, it may import any module directly in that package. Any other name computed at run
time is reported unless :data:`RUN_TIME_IMPORTS` lists its module: a rule that a deferred import could dodge
would not be a rule. Each module gets the layer of the entry in :data:`LAYERS` that names it (the longest, where
several do), and a module no entry names is reported; a module may import its own layer and the layers below
it, never one above. Studies sit on top, and one study may
not import another: what studies share lives in the shared modules named in :data:`STUDIES_SHARED`.

Circles are found among the project's own modules (an edge to a package is an edge to its ``__init__.py``; the
parent packages Python imports on the way are not edges, or everything would circle through ``interp``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

# Top to bottom, as in the design page's tree (docs/architecture.md says where the order differs, and why).
# A layer lists modules: ``NAME.*`` is the package NAME and everything under it, a plain NAME that one module
# alone, so that a new module is in no layer until it is placed (``interp`` is the package root, its
# ``__init__.py``, not a catch-all). The one-file helpers at the bottom import nothing of the project but each
# other. The package root exposes the public names and wires the model's delegated methods to the packages
# that implement them.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # Scripts run as files (no package): the project's own tools and its benchmarks, over everything below.
    ("scripts", ("scripts.*",)),
    ("benchmarks", ("benchmarks.*",)),
    ("studies", ("studies.*",)),
    ("package root", ("interp", "interp.__main__")),
    ("cli", ("interp.cli",)),
    ("commands", ("interp.commands.*",)),
    # interp serve's app calls every package below it and computes nothing of its own.
    ("serve", ("interp.serve.*",)),
    ("study scaffold", ("interp.study",)),
    ("compat", ("interp.compat.*",)),
    ("circuits", ("interp.circuits.*",)),
    ("sae", ("interp.sae.*",)),
    ("generation", ("interp.generation.*",)),
    # The explainer page and attention_view draw what analysis functions compute, so report sits above them.
    ("report", ("interp.report.*",)),
    ("analysis", ("interp.analysis.*",)),
    # The checks every command and study runs before anything loads: they read stores (check_store), and find
    # models and parse devices in load.
    ("preflight", ("interp.preflight",)),
    ("store", ("interp.store.*",)),
    ("load", ("interp.load.*", "interp.hf")),
    ("model", ("interp.model.*",)),
    (
        "helpers",
        (
            "interp.config",
            "interp.tokens",
            "interp.chat_template",
            "interp.atomic",
            "interp.distributed",
            "interp.registry",
            "interp.arguments",
            "interp.dictionary",
            "interp.feature_id",
            "interp.resumable",
            "interp.allocator",
        ),
    ),
    ("hooks", ("hooks.*",)),
)

# Modules every study may import; anything else under ``studies`` belongs to one study.
STUDIES_SHARED: tuple[str, ...] = (
    "studies",
    "studies.data",
    "studies.threads",
    "studies.record",
    "studies.readme_numbers",
)

# Imports left out of the circle search because another change removes them: (importer, imported).
ALLOWED_CIRCLE_EDGES: tuple[tuple[str, str], ...] = ()

# Modules that import a module whose name is known only at run time, and what they import that way. Any other
# ``import_module`` whose name the reader cannot tell is reported (see :func:`unread_imports`).
RUN_TIME_IMPORTS: dict[str, str] = {
    "interp.registry": "the studies registered in the interp.studies entry-point group, by their entry points",
}

PACKAGES = ("interp", "hooks", "studies", "benchmarks", "scripts")

SCRIPT_FOLDERS = ("benchmarks", "scripts")
"""Folders of scripts run as files, not packages: a script's own folder is first on ``sys.path``, so a bare
``import provenance`` in ``benchmarks/dashboards.py`` imports ``benchmarks/provenance.py``."""


@dataclass(frozen=True)
class Import:
    """One import statement: the file it is in, its line, and the project module it names."""

    source: str  # module name of the importing file
    target: str  # project module it resolves to
    line: int


def module_files(root: Path, packages: Sequence[str] = PACKAGES) -> dict[str, Path]:
    """Every module of the project under ``root``, by dotted name (a package by its own name)."""
    found = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def _resolve(name: str, modules: Mapping[str, Path]) -> str | None:
    """The longest prefix of ``name`` that is a project module, or None for a third-party import."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in modules:
            return candidate
    return None


def _sibling(module: str, name: str, modules: Mapping[str, Path]) -> str | None:
    """The module beside ``module`` that ``name`` imports, for a script of :data:`SCRIPT_FOLDERS` (else None)."""
    folder = module.split(".")[0]
    if folder not in SCRIPT_FOLDERS or name.split(".")[0] == folder:
        return None
    found = _resolve(f"{folder}.{name}", modules)
    return found if found is not None and found != folder else None


UNREAD = "?"
"""What :func:`_named` gives for an ``import_module`` whose module it cannot tell from the source."""


def _named(node: ast.AST, module: str, is_package: bool) -> Iterator[str]:
    """The dotted names an import node brings in, relative imports made absolute; ``PACKAGE.*`` for any module
    directly in ``PACKAGE``, :data:`UNREAD` for a name computed otherwise."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
        base = module if is_package else module.rpartition(".")[0]
        if node.level:
            base = ".".join(base.split(".")[: len(base.split(".")) - (node.level - 1)])
            base = f"{base}.{node.module}" if node.module else base
        else:
            base = node.module or ""
        yield from (f"{base}.{alias.name}" for alias in node.names)  # resolves to base when not a module
    elif isinstance(node, ast.Call):
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if called == "import_module" and node.args:
            yield _run_time_name(node.args[0], module)


def _run_time_name(arg: ast.expr, module: str) -> str:
    """The module an ``import_module`` argument names (see the module docstring), or :data:`UNREAD`."""
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    if not isinstance(arg, ast.JoinedStr) or not arg.values:
        return UNREAD
    *head, last = arg.values
    package = ""
    for part in head:
        if isinstance(part, ast.Constant) and isinstance(part.value, str):
            package += part.value
        elif isinstance(part, ast.FormattedValue) and getattr(part.value, "id", None) == "__name__":
            package += module
        else:
            return UNREAD
    if not isinstance(last, ast.FormattedValue) or not package.endswith("."):
        return UNREAD
    return package + "*"


def _parsed(root: Path, packages: Sequence[str]) -> Iterator[tuple[str, ast.AST, list[str]]]:
    """``(module, node, names)`` for every node of every project module that imports something."""
    for module, path in module_files(root, packages).items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            names = list(_named(node, module, path.name == "__init__.py"))
            if names:
                yield module, node, names


def imports(root: Path, packages: Sequence[str] = PACKAGES) -> list[Import]:
    """Every import of a project module by a project module under ``root``."""
    modules = module_files(root, packages)
    found = {}
    for module, node, names in _parsed(root, packages):
        for name in names:
            if name.endswith(".*"):  # any module directly in the package
                targets = [m for m in modules if m.rpartition(".")[0] == name[:-2]]
            else:
                targets = [_sibling(module, name, modules) or _resolve(name, modules)]
            for target in targets:
                if target is not None and target != module:
                    found.setdefault(Import(module, target, node.lineno), None)  # once per line and target
    return list(found)


def unread_imports(root: Path, packages: Sequence[str] = PACKAGES) -> list[str]:
    """One line per ``import_module`` whose module the source does not tell, outside :data:`RUN_TIME_IMPORTS`."""
    files = {name: path.relative_to(root).as_posix() for name, path in module_files(root, packages).items()}
    return [
        f"{files[module]}:{node.lineno} imports a module named at run time; name it in the source, or list "
        "the module in RUN_TIME_IMPORTS with what it imports"
        for module, node, names in _parsed(root, packages)
        if UNREAD in names and module not in RUN_TIME_IMPORTS
    ]


def layer_of(module: str, layers: Sequence[tuple[str, Sequence[str]]] = LAYERS) -> int | None:
    """The index in ``layers`` of the longest entry naming ``module`` (0 is the top), or None.

    ``NAME.*`` names the package NAME and every module under it; a plain ``NAME``, that one module.
    """
    best, best_length = None, -1
    for index, (_, entries) in enumerate(layers):
        for entry in entries:
            package = entry.removesuffix(".*")
            named = module == package or (entry.endswith(".*") and module.startswith(package + "."))
            if named and len(package) > best_length:
                best, best_length = index, len(package)
    return best


def _study(module: str) -> str | None:
    """The study package a ``studies`` module belongs to, or None for a shared one."""
    parts = module.split(".")
    if len(parts) < 2 or ".".join(parts[:2]) in STUDIES_SHARED:
        return None
    return ".".join(parts[:2])


def layer_violations(
    root: Path,
    layers: Sequence[tuple[str, Sequence[str]]] = LAYERS,
    packages: Sequence[str] = PACKAGES,
) -> list[str]:
    """One line per import that points up the layers, crosses between studies, or has no layer."""
    files = {name: path.relative_to(root).as_posix() for name, path in module_files(root, packages).items()}
    problems = [
        f"{files[m]} is in no layer; place it in docs/architecture.md and LAYERS"
        for m in files
        if layer_of(m, layers) is None
    ]
    for imp in imports(root, packages):
        source, target = layer_of(imp.source, layers), layer_of(imp.target, layers)
        if source is None or target is None:
            continue
        if target < source:
            problems.append(
                f"{_where(imp, files)}: layer {layers[source][0]!r} may not import {layers[target][0]!r} above it"
            )
    return problems


def study_crossings(root: Path, packages: Sequence[str] = PACKAGES) -> list[str]:
    """One line per import of one study's module by another study."""
    files = {name: path.relative_to(root).as_posix() for name, path in module_files(root, packages).items()}
    problems = []
    for imp in imports(root, packages):
        if not (imp.source.startswith("studies.") and imp.target.startswith("studies.")):
            continue
        mine, theirs = _study(imp.source), _study(imp.target)
        if theirs is not None and theirs != mine:
            problems.append(
                f"{_where(imp, files)}: a study imports another study; share it through studies/data/"
            )
    return problems


def _where(imp: Import, files: Mapping[str, str]) -> str:
    return f"{files[imp.source]}:{imp.line} imports {imp.target} ({files[imp.target]})"


def circles(root: Path, packages: Sequence[str] = PACKAGES) -> list[list[str]]:
    """The import circles among project modules: each a list of files, the first repeated at the end."""
    graph: dict[str, set[str]] = {}
    for imp in imports(root, packages):
        if (imp.source, imp.target) not in ALLOWED_CIRCLE_EDGES:
            graph.setdefault(imp.source, set()).add(imp.target)
    files = {name: path.relative_to(root).as_posix() for name, path in module_files(root, packages).items()}
    found = []
    for component in _strongly_connected(graph):
        if len(component) < 2:
            continue
        found.append([files[m] for m in _cycle_through(sorted(component)[0], set(component), graph)])
    return found


def _strongly_connected(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components, iteratively (the module graph can be deep)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(component)
    return components


def _cycle_through(start: str, members: set[str], graph: Mapping[str, set[str]]) -> list[str]:
    """A shortest path from ``start`` back to itself inside one strongly connected component."""
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph.get(node, ())):
                if child not in members or child in previous:
                    continue
                previous[child] = node
                if child == start:
                    path = [start]
                    while path[-1] != start or len(path) == 1:
                        path.append(previous[path[-1]])
                    return path[::-1]
                following.append(child)
        frontier = following
    raise AssertionError(f"{start} is in a component but on no cycle")
