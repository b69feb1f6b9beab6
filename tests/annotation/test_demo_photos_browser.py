"""The demo's photo study in Chromium, as `make run` shows it: annotator1 opens an item, the
photo's thumbnail loads through the guarded view, and z (or a click) opens the zoom dialog."""

import io

import pytest
from django.core.management import call_command
from django.db import connection

from annotation.demo import IMAGE_STUDY
from annotation.models import Study
from tests.browser import BROWSER_TESTS
from tests.proactweb.test_reading_in_browser import login, new_page, open_item

pytestmark = BROWSER_TESTS
LOADED = "img => img.complete && img.naturalWidth > 0"


@pytest.fixture
def demo(monkeypatch):
    # Playwright's sync API runs an event loop in this thread; the ORM calls here are safe.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    call_command("load_demo", stdout=io.StringIO())
    yield Study.objects.get(name=IMAGE_STUDY)
    connection.close()  # the ORM's connection from this thread (PostgreSQL must drop the db)


def test_the_demo_photo_opens_in_the_zoom_dialog(demo, browser, live_server):
    page = new_page(browser)
    login(page, live_server, "annotator1")
    open_item(page, live_server, demo)
    thumbnail = page.locator("#workspace .turn-image img").first
    thumbnail.scroll_into_view_if_needed()
    page.wait_for_function(
        f"() => ({LOADED})(document.querySelector('#workspace .turn-image img'))", timeout=10_000
    )
    assert thumbnail.get_attribute("src").startswith("/annotate/images/")
    alt = thumbnail.get_attribute("alt")
    assert alt  # the corpus's alt text
    zoom = page.locator("#image-zoom")
    assert not zoom.is_visible()
    page.keyboard.press("z")
    zoom.wait_for(state="visible")
    page.wait_for_function(f"() => ({LOADED})(document.querySelector('#image-zoom img'))")
    assert zoom.locator("img").get_attribute("alt") == alt
    page.keyboard.press("Escape")
    zoom.wait_for(state="hidden")
    thumbnail.click()
    zoom.wait_for(state="visible")
    page.context.close()
