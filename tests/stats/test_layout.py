import ast
from pathlib import Path

import stats

PURE = [*Path(stats.__file__).parent.joinpath("compute").glob("*.py")]
PURE += [Path(stats.__file__).parent / name for name in ("interfaces.py", "release_files.py")]


def test_the_statistics_are_pure_functions_without_django():
    for path in PURE:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            for name in names:
                assert not name.startswith(
                    ("django", "benchmark", "annotation", "stats.models", "stats.selectors")
                ), f"{path.name} imports {name}"
