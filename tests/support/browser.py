"""A real headless Chromium (Debian's `chromium` and `chromium-driver` packages) driven by Selenium.

The `browser` fixture yields a `Browser`: a WebDriver plus `shot(name)`, which saves a screenshot
under the test's tmp dir, and `console_errors()`, the browser console's SEVERE entries. Every test
that uses it ends with no console errors: the fixture asserts it at teardown. Nothing is downloaded:
a machine without the packages fails the test with the command that installs them.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

CHROMIUM = "/usr/bin/chromium"
DRIVER = "/usr/bin/chromedriver"


class Browser:
    """One headless Chromium session; `shots` is where `shot` saves screenshots."""

    def __init__(self, shots: Path) -> None:
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                    "--window-size=1280,900", "--no-first-run", "--disable-extensions"):
            options.add_argument(arg)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        self.driver = webdriver.Chrome(service=Service(DRIVER), options=options)
        self.driver.set_page_load_timeout(30)
        self.shots = shots
        self._errors: list[dict] = []

    def get(self, url: str) -> None:
        self.driver.get(url)

    def shot(self, name: str) -> Path:
        """Save a screenshot of the page as it is now, as `<tmp>/screenshots/<name>.png`."""
        self.shots.mkdir(parents=True, exist_ok=True)
        path = self.shots / f"{name}.png"
        assert self.driver.save_screenshot(str(path)), f"screenshot {path} was not written"
        return path

    def console_errors(self) -> list[dict]:
        """SEVERE console entries since the session started (the log is drained on each read, so keep them)."""
        self._errors += [e for e in self.driver.get_log("browser") if e.get("level") == "SEVERE"]
        return list(self._errors)

    def wait_for(self, check: Callable[[], object], timeout: float = 15, what: str = "the page") -> object:
        """Poll `check` until it returns something truthy; fail naming `what` after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            value = check()
            if value:
                return value
            if time.monotonic() > deadline:
                self.shot("timeout")
                raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
            time.sleep(0.1)

    def quit(self) -> None:
        self.driver.quit()


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Browser]:
    """A headless Chromium for one test; at teardown, the console must hold no errors."""
    missing = [p for p in (CHROMIUM, DRIVER) if not shutil.which(p)]
    assert not missing, f"{', '.join(missing)} missing: apt-get install chromium chromium-driver (scripts/setup does)"
    b = Browser(tmp_path / "screenshots")
    try:
        yield b
        errors = b.console_errors()
        assert not errors, f"browser console errors: {errors}"
    finally:
        b.quit()
