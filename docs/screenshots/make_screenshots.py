"""The README's screenshots, made afresh from the running app so that they stay true.

    .venv/bin/python docs/screenshots/make_screenshots.py
    .venv/bin/python docs/screenshots/make_screenshots.py 1-annotator-home 5-dashboard  # those

Named: only those are written, so that a change to one page leaves the other PNGs as they were.

Migrates a throw-away database in a temporary var directory, loads the demo data and its
logins (``load_demo``), starts ``manage.py runserver`` on a free local port, logs in as the
demo users in Debian's headless Chromium (``/usr/bin/chromium``, driven by Playwright) and
writes each page below as ``docs/screenshots/<name>.png``; then stops the server and removes
the directory. Nothing outside this machine is contacted. Where ``pngquant`` is installed
(Debian's package), the PNGs are quantised to a palette: a third of the size, the same to
the eye.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from playwright.sync_api import Page, sync_playwright

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CHROMIUM = "/usr/bin/chromium"


@dataclass(frozen=True)
class Shot:
    name: str  # the PNG's name, without .png
    user: str  # a demo login (its password is demo-<user>)
    path: str
    width: int = 1200
    height: int = 760
    scheme: str = "light"
    before: Callable[[Page], None] | None = None  # what to do on the page first


def open_first_item(page: Page) -> None:
    page.keyboard.press("Enter")
    page.wait_for_function("() => document.getElementById('workspace')?.dataset.item")
    page.wait_for_load_state("networkidle")


def open_item_at_the_reply(page: Page) -> None:
    open_first_item(page)
    page.locator("h2.section").last.scroll_into_view_if_needed()
    page.evaluate("window.scrollBy(0, -40)")


SHOTS = [
    Shot("1-annotator-home", "annotator1", "/annotate/", height=600),  # nine studies
    Shot("2-pairwise-workspace", "annotator1", "/annotate/1/", before=open_first_item),
    Shot("3-audit-workspace", "annotator1", "/annotate/2/", width=1280, before=open_first_item),
    Shot("4-adjudication-evidence", "annotator1", "/annotate/3/", before=open_item_at_the_reply),
    Shot("5-dashboard", "researcher", "/stats/"),
    Shot("6-phone-dark", "annotator1", "/annotate/4/", width=390, height=760, scheme="dark",
         before=open_first_item),
]  # fmt: skip


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def manage(env: dict[str, str], *args: str) -> None:
    subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, check=True)


def wait_for(url: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2):  # noqa: S310 - our own local server
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)


def capture(base: str, shots: list[Shot]) -> None:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox"]
        )
        for shot in shots:
            context = browser.new_context(
                viewport={"width": shot.width, "height": shot.height}, color_scheme=shot.scheme
            )
            page = context.new_page()
            page.goto(f"{base}/accounts/login/")
            page.fill("#id_username", shot.user)
            page.fill("#id_password", f"demo-{shot.user}")
            page.click("button[type=submit]")
            page.wait_for_load_state("networkidle")
            page.goto(base + shot.path)
            page.wait_for_load_state("networkidle")
            if shot.before:
                shot.before(page)
            out = HERE / f"{shot.name}.png"
            page.screenshot(path=str(out))
            if shutil.which("pngquant"):
                subprocess.run(
                    ["pngquant", "--force", "--skip-if-larger", "--output", str(out), str(out)],
                    check=False,  # 98: not smaller; the full-colour PNG stays
                )
            print(f"{out.relative_to(ROOT)}: {out.stat().st_size // 1024} KB")
            context.close()
        browser.close()


def main() -> None:
    names = sys.argv[1:]
    unknown = set(names) - {shot.name for shot in SHOTS}
    if unknown:
        sys.exit(f"no such screenshot: {', '.join(sorted(unknown))} (see SHOTS)")
    shots = [shot for shot in SHOTS if not names or shot.name in names]
    with tempfile.TemporaryDirectory(prefix="proactbench-shots-") as var:
        env = {**os.environ, "PROACTWEB_VAR_DIR": var, "DEBUG": "1"}
        env.pop("DATABASE_URL", None)  # the embedded SQLite database in the temporary directory
        env.pop("REDIS_URL", None)
        manage(env, "migrate", "--no-input", "-v0")
        manage(env, "load_demo")
        port = free_port()
        server = subprocess.Popen(
            [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            base = f"http://127.0.0.1:{port}"
            wait_for(f"{base}/accounts/login/")
            capture(base, shots)
        finally:
            server.terminate()
            server.wait(timeout=30)


if __name__ == "__main__":
    main()
