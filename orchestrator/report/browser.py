"""Open a page in headless Chromium and read it back: a screenshot, the JavaScript errors the page raised,
and the values of expressions evaluated in it. Used by `specsweep report --screenshot` and by the report's
browser test.

It speaks the Chrome DevTools Protocol over `--remote-debugging-pipe` (file descriptors 3 and 4, messages
separated by NUL bytes), so it needs nothing but a Chromium binary: no driver, no Python package.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")


class BrowserError(RuntimeError):
    pass


def find_chromium() -> str | None:
    """SPECSWEEP_CHROMIUM, else the first Chromium/Chrome on PATH."""
    env = os.environ.get("SPECSWEEP_CHROMIUM")
    if env:
        return env if Path(env).is_file() else None
    for name in CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


@dataclass
class PageResult:
    errors: list[str] = field(default_factory=list)  # uncaught exceptions, console.error, error log entries
    values: dict[str, object] = field(default_factory=dict)  # expression -> its JSON value
    screenshot: Path | None = None


class _Pipe:
    def __init__(self, binary: str, profile: str):
        cmd_r, cmd_w = os.pipe()  # we write commands, Chromium reads them on its fd 3
        ev_r, ev_w = os.pipe()  # Chromium writes answers and events on its fd 4
        args = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                "--no-default-browser-check", "--hide-scrollbars", "--remote-debugging-pipe",
                f"--user-data-dir={profile}", "about:blank"]
        # Chromium's end of each pipe moved above 9 (close-on-exec), so that placing them on 3 and 4 in the
        # child cannot overwrite one with the other; the dup2 copies on 3 and 4 are the ones Chromium inherits.
        hi_r = fcntl.fcntl(cmd_r, fcntl.F_DUPFD_CLOEXEC, 10)
        hi_w = fcntl.fcntl(ev_w, fcntl.F_DUPFD_CLOEXEC, 10)
        os.close(cmd_r)
        os.close(ev_w)

        def place_fds() -> None:
            os.dup2(hi_r, 3)
            os.dup2(hi_w, 4)

        try:  # close_fds=False: fds 3 and 4 must survive into Chromium (Python's own fds are close-on-exec)
            self.proc = subprocess.Popen(args, preexec_fn=place_fds, close_fds=False, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        finally:
            os.close(hi_r)
            os.close(hi_w)
        self.w = cmd_w
        self.r = ev_r
        self.buf = b""
        self.next_id = 0
        self.events: list[dict] = []

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> int:
        self.next_id += 1
        msg: dict = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.w, json.dumps(msg).encode() + b"\0")
        return self.next_id

    def read(self, deadline: float) -> dict:
        import select

        while b"\0" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.r], [], [], left)[0]:
                raise BrowserError("Chromium did not answer in time")
            chunk = os.read(self.r, 1 << 20)
            if not chunk:
                err = self.proc.stderr.read().decode(errors="replace")[-2000:] if self.proc.stderr else ""
                raise BrowserError(f"Chromium exited (code {self.proc.poll()}): {err}")
            self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method: str, params: dict | None = None, session: str | None = None,
             timeout_s: float = 60) -> dict:
        i = self.send(method, params, session)
        deadline = time.monotonic() + timeout_s
        while True:
            m = self.read(deadline)
            if m.get("id") == i:
                if "error" in m:
                    raise BrowserError(f"{method}: {m['error'].get('message')}")
                return m.get("result", {})
            self.events.append(m)

    def wait_for(self, method: str, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while not any(e.get("method") == method for e in self.events):
            self.events.append(self.read(deadline))

    def close(self) -> None:
        try:
            self.send("Browser.close")
            self.proc.wait(10)
        except Exception:
            self.proc.kill()
            self.proc.wait(10)
        for fd in (self.w, self.r):
            try:
                os.close(fd)
            except OSError:
                pass


def _errors(events: list[dict]) -> list[str]:
    out = []
    for e in events:
        p = e.get("params", {})
        if e.get("method") == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            out.append(f"exception: {d.get('exception', {}).get('description') or d.get('text')}")
        elif e.get("method") == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            out.append("console.error: " + " ".join(str(a.get("value", a.get("description"))) for a in p.get("args", [])))
        elif e.get("method") == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            out.append(f"log: {p['entry'].get('text')} {p['entry'].get('url', '')}".strip())
    return out


def open_page(page: Path, screenshot: Path | None = None, expressions: tuple[str, ...] = (),
              width: int = 1400, height: int = 1000, full_page: bool = True,
              wait_until: str | None = "document.body.dataset.plots !== 'loading'", settle_s: float = 0.3,
              binary: str | None = None, timeout_s: float = 120) -> PageResult:
    """Load `page` (a local file), wait for its load event, then until the expression `wait_until` is true
    (the report marks <body data-plots> when its figures are drawn) and `settle_s` more; evaluate
    `expressions`, and optionally save a PNG screenshot (the whole page when `full_page`)."""
    binary = binary or find_chromium()
    if not binary:
        raise BrowserError("no Chromium found: install it (Debian: apt-get install chromium) or set "
                           "SPECSWEEP_CHROMIUM to the browser's path")
    with tempfile.TemporaryDirectory(prefix="specsweep-chromium-") as profile:
        pipe = _Pipe(binary, profile)
        try:
            target = pipe.call("Target.createTarget", {"url": "about:blank"}, timeout_s=timeout_s)["targetId"]
            s = pipe.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            for domain in ("Page.enable", "Runtime.enable", "Log.enable"):
                pipe.call(domain, session=s)
            pipe.call("Emulation.setDeviceMetricsOverride",
                      {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, session=s)
            pipe.call("Page.navigate", {"url": Path(page).resolve().as_uri()}, session=s)
            pipe.wait_for("Page.loadEventFired", timeout_s)
            deadline = time.monotonic() + timeout_s
            while wait_until:
                r = pipe.call("Runtime.evaluate", {"expression": f"!!({wait_until})", "returnByValue": True},
                              session=s)
                if r.get("result", {}).get("value") is True:
                    break
                if time.monotonic() > deadline:
                    raise BrowserError(f"the page never reached {wait_until!r} in {timeout_s:.0f} s")
                time.sleep(0.2)
            time.sleep(settle_s)
            result = PageResult()
            for expr in expressions:
                r = pipe.call("Runtime.evaluate", {"expression": expr, "returnByValue": True}, session=s)
                if "exceptionDetails" in r:
                    raise BrowserError(f"evaluating {expr!r}: {r['exceptionDetails'].get('text')}")
                result.values[expr] = r.get("result", {}).get("value")
            if screenshot is not None:
                params: dict = {"format": "png"}
                if full_page:
                    size = pipe.call("Page.getLayoutMetrics", session=s)["cssContentSize"]
                    params.update(captureBeyondViewport=True,
                                  clip={"x": 0, "y": 0, "width": width, "height": int(size["height"]), "scale": 1})
                shot = pipe.call("Page.captureScreenshot", params, session=s, timeout_s=timeout_s)
                screenshot.write_bytes(base64.b64decode(shot["data"]))
                result.screenshot = screenshot
            result.errors = _errors(pipe.events)
            return result
        finally:
            pipe.close()
