"""A real headless Chromium (the Debian packages ``chromium`` and ``chromium-driver``),
driven through Selenium and the system chromedriver: nothing is downloaded.

The flags keep Chromium from its background connections (updates, sync, QUIC probes),
which a closed network refuses, and a fresh profile per browser keeps tests apart.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,900",
)


def missing() -> str | None:
    """Why no browser can start here (which package to install), or None."""
    for binary, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not binary.exists():
            return f"{binary} not found: install the Debian package {package} (deploy/ci-packages.txt)"
    return None


@contextmanager
def chromium() -> Iterator[webdriver.Chrome]:
    problem = missing()
    if problem is not None:
        raise RuntimeError(problem)
    profile = tempfile.mkdtemp(prefix="skillgauge-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def screenshot(driver: webdriver.Chrome, path: Path) -> None:
    """What the window shows (1280 x 900) as a PNG."""
    path.parent.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(path))
