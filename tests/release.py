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


FULL_RELEASE_DIR = os.environ.get("PROACTBENCH_FULL_RELEASE_DIR", "")


def full_release_dir(*needed: str) -> Path:
    """The full release's top folder (``dataset/`` or ``human_eval/`` inside) named by
    PROACTBENCH_FULL_RELEASE_DIR, with the files ``needed`` (globs under ``human_eval/``);
    the test skips, saying so, when it is not there (only samples ship beside the checkout)."""
    if not FULL_RELEASE_DIR:
        pytest.skip(
            "the full ProactBench release is not here (only samples ship beside the checkout): "
            "set PROACTBENCH_FULL_RELEASE_DIR to its folder to check the published figures"
        )
    root = Path(FULL_RELEASE_DIR)
    for base in (root / "dataset" / "human_eval", root / "human_eval"):
        if base.is_dir():
            missing = [glob for glob in needed if not any(base.glob(glob))]
            if missing:
                pytest.skip(f"{base} lacks {', '.join(missing)}")
            return root
    pytest.skip(f"no human_eval folder in {root}")
