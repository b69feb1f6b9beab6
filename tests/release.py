"""Where the official release samples are: ../shared/formats/proactbench-release beside the
checkout, or PROACTBENCH_RELEASE_DIR. They are read from there, never copied into the repo."""

import os
from pathlib import Path

import pytest

RELEASE_DIR = Path(
    os.environ.get(
        "PROACTBENCH_RELEASE_DIR",
        Path(__file__).resolve().parent.parent.parent
        / "shared"
        / "formats"
        / "proactbench-release",
    )
)


def release_file(name: str) -> Path:
    path = RELEASE_DIR / name
    if not path.exists():
        pytest.skip(
            f"release sample {name} not found in {RELEASE_DIR}: it ships beside the project's "
            "own checkout, not inside it (set PROACTBENCH_RELEASE_DIR to point at a copy)"
        )
    return path
