"""The import rules of docs/architecture.md, read from the source (every import statement,
function-level ones included; ``if TYPE_CHECKING:`` blocks are annotations, not imports):

- the apps are layered — core < benchmark < annotation < stats < proactweb — and a module
  imports only from its own layer and those below it;
- no module imports another one that (directly or through others) imports it back;
- no module imports a ``_private`` name from another app.
"""

import ast
import graphlib
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

LAYERS = ("core", "benchmark", "annotation", "stats", "proactweb")
ROOT = Path(settings.BASE_DIR)


@dataclass(frozen=True)
class Import:
    source: str  # the importing module
    target: str  # the module imported (a project module)
    names: tuple[str, ...]  # the names taken from it ("" for ``import x``)
    line: int


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {
        _module_name(path): path
        for layer in LAYERS
        for path in (ROOT / layer).rglob("*.py")
        if "migrations" not in path.parts
    }


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def _imports(modules: dict[str, Path]) -> list[Import]:
    found = []
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = _type_checking_lines(tree)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(tree):
            if getattr(node, "lineno", None) in skip:
                continue
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] in LAYERS:
                        found.append(Import(name, alias.name, ("",), node.lineno))
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, *([base] if base else [])])
                if base.split(".")[0] not in LAYERS:
                    continue
                for alias in node.names:
                    # ``from a import b`` imports module a.b when there is one.
                    target = f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                    found.append(Import(name, target, (alias.name,), node.lineno))
    return found


def _layer(module: str) -> int:
    return LAYERS.index(module.split(".")[0])


def test_each_app_imports_only_its_own_layer_and_those_below():
    modules = _modules()
    upward = [
        f"{i.source}:{i.line} imports {i.target}"
        for i in _imports(modules)
        if _layer(i.target) > _layer(i.source)
    ]
    assert upward == []


def test_no_module_imports_itself_through_others():
    modules = _modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for i in _imports(modules):
        if i.target != i.source:
            graph[i.source].add(i.target)
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:
        raise AssertionError(f"import cycle: {' -> '.join(exc.args[1])}") from None


def test_no_private_name_is_imported_from_another_app():
    private = [
        f"{i.source}:{i.line} imports {name} from {i.target}"
        for i in _imports(_modules())
        for name in i.names
        if name.startswith("_") and i.target.split(".")[0] != i.source.split(".")[0]
    ]
    assert private == []


def test_the_rules_see_the_imports_they_judge():
    """The checks above would pass on nothing at all: make sure they read real edges."""
    imports = _imports(_modules())
    edges = {(i.source, i.target) for i in imports}
    assert ("annotation.services.studies", "annotation.kinds") in edges
    assert ("stats.studies", "annotation.kinds.pairwise") in edges
    assert ("benchmark.evaluation.runs", "benchmark.evaluation.tasks") in edges
    assert len(imports) > 300
