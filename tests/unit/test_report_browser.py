"""report.html in a real browser: headless Chromium renders every plot, fetches nothing, logs no error.

The page is the one `python -m analysis report DIR --out OUT` writes. Chromium is driven through
its own DevTools protocol over --remote-debugging-pipe (fd 3: commands in, fd 4: replies and
events out, NUL-terminated JSON), so no driver library is needed. One screenshot is kept in the
test's tmp folder as an artefact; its path is printed.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
FACTS = Path(__file__).parent / "fixtures" / "facts" / "t2probe"
# No network on the test machines, and none wanted: nothing starts in the background.
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage", "--remote-debugging-pipe",
    "--window-size=1280,900",
]  # fmt: skip
LOCAL_SCHEMES = ("file:", "data:", "about:", "blob:")
TIMEOUT_S = 60.0


class DevTools:
    """A Chromium process and its DevTools pipe: commands with replies, and the events seen so far."""

    def __init__(self, chromium: str, profile: Path, log: Path) -> None:
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        # The browser reads commands on fd 3 and writes on fd 4: bash puts the pipes there (dash
        # takes single-digit fds only, and a busy test process has more open than that).
        script = f'exec "$0" "$@" 3<&{to_browser_r} 4>&{from_browser_w}'
        with log.open("wb") as err:
            self.process = subprocess.Popen(
                ["bash", "-c", script, chromium, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                pass_fds=(to_browser_r, from_browser_w), stdout=err, stderr=err,
            )  # fmt: skip
        os.close(to_browser_r)
        os.close(from_browser_w)
        self.events: list[dict[str, Any]] = []
        self._buffer = b""
        self._next_id = 0
        self._deadline = time.monotonic() + TIMEOUT_S

    def _message(self) -> dict[str, Any]:
        """The next message from the browser (blocking until it comes or the deadline passes)."""
        while b"\0" not in self._buffer:
            left = self._deadline - time.monotonic()
            ready, _, _ = select.select([self._from_browser], [], [], max(left, 0.0))
            if not ready:
                raise TimeoutError(f"no reply from chromium within {TIMEOUT_S:.0f} s")
            chunk = os.read(self._from_browser, 1 << 16)
            if not chunk:
                raise ConnectionError("chromium closed its DevTools pipe")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)

    def send(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        """Run one command and return its result; events that arrive meanwhile are kept."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._message()
            if reply.get("id") == self._next_id:
                assert "error" not in reply, (method, reply)
                return reply["result"]
            self.events.append(reply)

    def wait_for(self, method: str) -> dict[str, Any]:
        """The first event `method` (already seen or still to come)."""
        seen = [e for e in self.events if e.get("method") == method]
        while not seen:
            event = self._message()
            self.events.append(event)
            seen = [event] if event.get("method") == method else []
        return seen[0]

    def close(self) -> None:
        """Ask the browser to quit; kill it if it has not within 10 s."""
        # A browser that already died has nothing to close: the wait below still reaps it.
        with contextlib.suppress(OSError, TimeoutError, ConnectionError):
            self.send("Browser.close")
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
        os.close(self._to_browser)
        os.close(self._from_browser)


def problems(events: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """(URLs fetched from anywhere but this machine, console errors and uncaught exceptions)."""
    fetched = [
        e["params"]["request"]["url"]
        for e in events
        if e.get("method") == "Network.requestWillBeSent"
        and not e["params"]["request"]["url"].startswith(LOCAL_SCHEMES)
    ]
    errors = [
        json.dumps(e["params"])[:500]
        for e in events
        if (e.get("method") == "Runtime.consoleAPICalled" and e["params"]["type"] in ("error", "assert"))
        or e.get("method") == "Runtime.exceptionThrown"
        or (e.get("method") == "Log.entryAdded" and e["params"]["entry"]["level"] == "error")
    ]
    return fetched, errors


IMAGES = """Promise.all(Array.from(document.images, img => img.decode().then(() => true, () => false)
    .then(decoded => ({alt: img.alt, decoded, width: img.naturalWidth, height: img.naturalHeight}))))"""


def test_report_html_renders_every_plot_offline_without_errors(tmp_path: Path) -> None:
    chromium = shutil.which("chromium")
    assert chromium, "chromium is missing: apt-get install chromium (scripts/setup.sh installs it)"
    out = tmp_path / "report"
    made = subprocess.run([sys.executable, "-m", "analysis", "report", str(FACTS), "--out", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert made.returncode == 0, made.stderr
    plots = sorted(out.glob("*.png"))
    assert plots, f"the report wrote no plot: {sorted(p.name for p in out.iterdir())}"

    browser = DevTools(chromium, tmp_path / "profile", tmp_path / "chromium.log")
    try:
        target = browser.send("Target.createTarget", url="about:blank")["targetId"]
        session = browser.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            browser.send(f"{domain}.enable", session)
        browser.send("Page.navigate", session, url=(out / "report.html").as_uri())
        browser.wait_for("Page.loadEventFired")
        images = browser.send("Runtime.evaluate", session, expression=IMAGES, awaitPromise=True,
                              returnByValue=True)["result"]["value"]  # fmt: skip
        shot = browser.send("Page.captureScreenshot", session, format="png", captureBeyondViewport=True)
    finally:
        browser.close()

    screenshot = tmp_path / "report.png"
    screenshot.write_bytes(base64.b64decode(shot["data"]))
    print(f"screenshot of report.html: {screenshot}")
    assert screenshot.read_bytes().startswith(b"\x89PNG\r\n\x1a\n") and screenshot.stat().st_size > 10_000
    # Each plot the report wrote is on the page (the page may show other images too).
    assert len(images) >= len(plots), (images, [p.name for p in plots])
    broken = [i for i in images if not (i["decoded"] and i["width"] > 0 and i["height"] > 0)]
    assert not broken, broken
    fetched, errors = problems(browser.events)
    assert not fetched, fetched
    assert not errors, errors
