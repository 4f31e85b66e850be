"""A headless Chromium driven by Selenium through Debian's chromedriver, for the tests, the
screenshots and the benchmark (never Selenium Manager: nothing is downloaded)."""

from __future__ import annotations

import shutil
import tempfile
from typing import Any

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
)


def browser_missing() -> str | None:
    """Why a browser cannot be started here, or None."""
    for path in (CHROMIUM, CHROMEDRIVER):
        if shutil.which(path) is None:
            return f"{path} is missing (Debian: apt-get install chromium chromium-driver, or scripts/install-system-deps.sh)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is missing: pip install 'mlgoodput[test]'"
    return None


class Browser:
    """One Chromium with a fresh profile; `close()` removes the profile."""

    def __init__(self, width: int = 1440, height: int = 1000) -> None:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        self.profile = tempfile.mkdtemp(prefix="mlgoodput-chromium-")
        opts = webdriver.ChromeOptions()
        opts.binary_location = CHROMIUM
        for f in FLAGS:
            opts.add_argument(f)
        opts.add_argument(f"--user-data-dir={self.profile}")
        opts.add_argument(f"--window-size={width},{height}")
        opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        try:
            self.driver: Any = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
        except Exception:
            shutil.rmtree(self.profile, ignore_errors=True)
            raise

    def console_errors(self) -> list[str]:
        """Severe browser console entries since the last call (errors, failed loads)."""
        return [e["message"] for e in self.driver.get_log("browser") if e.get("level") == "SEVERE"]

    def close(self) -> None:
        try:
            self.driver.quit()
        finally:
            shutil.rmtree(self.profile, ignore_errors=True)
