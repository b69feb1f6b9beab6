"""Turn images in Chromium: the thumbnail loads through the guarded view, its alt text shows,
a click or z zooms it, and while the zoom is open the answer keys stay quiet."""

from annotation.models import Answer
from tests.annotation.test_browser import login, page, press_until_new_item, screenshot  # noqa: F401
from tests.browser import BROWSER_TESTS
from tests.images import image_bytes, stored_turn_image

pytestmark = BROWSER_TESTS

LOADED = "img => img.complete && img.naturalWidth > 0"


def test_a_turn_image_shows_zooms_by_click_and_key_with_its_alt_text(
    page,  # noqa: F811
    live_server,
    make_study,
    make_annotators,
):
    user = make_annotators(1)[0]
    study = make_study("direct_rating", annotators=[user], overlap=1, max_items=2)
    for turn in {item.trigger.turn for item in study.items.select_related("trigger__turn")}:
        stored_turn_image(turn, image_bytes(size=(320, 200)), alt="a mug behind a box")
    login(page, live_server, user)
    page.goto(f"{live_server.url}/annotate/{study.pk}/")
    press_until_new_item(page, "Enter", "")
    thumbnail = page.locator("#workspace .turn-image img").first
    thumbnail.wait_for()
    # Thumbnails load lazily: in view, it must load through the image view.
    thumbnail.scroll_into_view_if_needed()
    page.wait_for_function(
        f"() => ({LOADED})(document.querySelector('#workspace .turn-image img'))", timeout=10_000
    )
    assert thumbnail.get_attribute("alt") == "a mug behind a box"
    assert page.locator("#workspace .turn-image figcaption").first.inner_text() == (
        "a mug behind a box"
    )
    zoom = page.locator("#image-zoom")
    assert not zoom.is_visible()
    # The key: z opens, the answer keys are quiet while it is open, z closes.
    page.keyboard.press("z")
    zoom.wait_for(state="visible")
    big = zoom.locator("img")
    page.wait_for_function(f"() => ({LOADED})(document.querySelector('#image-zoom img'))")
    assert big.get_attribute("alt") == "a mug behind a box"
    assert zoom.locator("figcaption").inner_text() == "a mug behind a box"
    box = big.bounding_box()
    assert box["width"] > thumbnail.bounding_box()["width"]
    screenshot(page, "turn-image-zoom")
    page.keyboard.press("p")  # Pass, were the zoom not open
    assert not page.locator("input[name=verdict][value=PASS]").is_checked()
    page.keyboard.press("z")
    zoom.wait_for(state="hidden")
    # The click: opens; Esc closes; then the keys answer again.
    thumbnail.click()
    zoom.wait_for(state="visible")
    page.keyboard.press("Escape")
    zoom.wait_for(state="hidden")
    page.keyboard.press("p")
    assert page.locator("input[name=verdict][value=PASS]").is_checked()
    assert not Answer.objects.exists()
