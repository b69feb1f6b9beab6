"""What the browser tests share: Debian's Chromium (Playwright's own browser download is not
used), the marks every browser test module carries, and the ``browser`` fixture's launch
(tests/conftest.py)."""

import os

import pytest

CHROMIUM = "/usr/bin/chromium"

# pytestmark of a browser test module: slow, a real (committed) database for the live server,
# and skipped, saying why, where Chromium is not installed.
BROWSER_TESTS = [
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        not os.path.exists(CHROMIUM),
        reason=f"{CHROMIUM} is missing: install Debian's chromium (apt-get install chromium; "
        ".ci/run does); Playwright's own browser download is not used",
    ),
]

LAUNCH_ARGS = [
    "--no-sandbox",
    # Nothing but the page under test: the machine may have no network to phone home to.
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
