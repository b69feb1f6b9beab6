import ast
import sys
from pathlib import Path

import benchmark
import stats

PURE = [*Path(stats.__file__).parent.joinpath("compute").glob("*.py")]
PURE += [Path(stats.__file__).parent / name for name in ("interfaces.py", "release_files.py")]


# The protocol's vocabulary (verdicts, failure modes) is plain Python: the pure statistics may
# read it, and it may import nothing but the standard library.
VOCABULARY = Path(benchmark.__file__).parent / "vocabulary.py"


def _imports(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names.append(node.module or "")
    return names


def test_the_statistics_are_pure_functions_without_django():
    for path in PURE:
        for name in _imports(path):
            if name == "benchmark.vocabulary":
                continue
            assert not name.startswith(
                ("django", "benchmark", "annotation", "stats.models", "stats.selectors")
            ), f"{path.name} imports {name}"


def test_the_vocabulary_the_statistics_read_is_plain_python():
    assert _imports(VOCABULARY)  # the check really ran
    for name in _imports(VOCABULARY):
        assert name.split(".")[0] in sys.stdlib_module_names, f"vocabulary.py imports {name}"
