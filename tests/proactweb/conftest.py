# Headless Chromium, for the browser tests of this folder (defined beside its first user).
from tests.proactweb.test_untrusted_text_in_browser import browser  # noqa: F401
