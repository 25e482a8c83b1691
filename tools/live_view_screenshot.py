"""A screenshot of the live view in Lichtblick (the open-source fork of Foxglove Studio), for docs/live-view.md.

    source tools/env.sh
    python tools/live_view_screenshot.py --viewer PATH/TO/lichtblick/web/.webpack
    python tools/live_view_screenshot.py --write-layout live_view_lichtblick.json   # the layout only

Starts ``gamma-net demo`` (the emulated arm, its driver, the scripted operator and the ``horde``
node on config/horde.yaml), the ``live_view`` node, and a local web server for the Lichtblick web
app built at ``--viewer``; opens the app in headless Chromium on
``?ds=foxglove-websocket&ds.url=ws://127.0.0.1:PORT&layoutUrl=...`` with config/live_view.json's
layout (converted: Lichtblick imports its own layout format, not the Foxglove app's). Once the demo
reports the Horde's first running errors it lets the plots fill for ``--seconds``, refuses to save
a page that shows an alert (a channel it could not read) or lacks the question's panels, and saves
the page as a PNG.

Needs Chromium (``apt-get install chromium``) and a Lichtblick web build (docs/live-view.md says how);
neither is part of the project's install: this is a documentation tool. Every process it starts is
stopped before it returns.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import functools
import http.server
import itertools
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parent.parent
LAYOUT_NAME = "gamma_net_live_view.json"


# --- Lichtblick's layout from the Foxglove app's (config/live_view.json) ---------------------------


def lichtblick_layout(foxglove: dict) -> dict:
    """The layout ``foxglove`` (the Foxglove app's format, as foxglove.layouts writes it) in Lichtblick's format.

    Lichtblick keeps panels in ``configById`` and arranges their ids in a react-mosaic tree (binary
    splits with a percentage); a Tab panel holds one such tree per tab.
    """
    config_by_id: dict[str, dict] = {}
    ids = itertools.count(1)

    def panel(content: dict):
        kind = content["type"]
        if kind == "panel":
            if content["panelType"] != "Plot":
                raise ValueError(f"panel type {content['panelType']!r} has no conversion (Plot only)")
            pid = f"Plot!gn{next(ids)}"
            config_by_id[pid] = plot_config(content["config"], content.get("title"))
            return pid
        if kind == "split":
            return split(content["direction"], content["items"])
        if kind == "tabs":
            pid = f"Tab!gn{next(ids)}"
            config_by_id[pid] = {
                "activeTabIdx": content.get("selectedTabIndex", 0),
                "tabs": [{"title": tab["title"], "layout": panel(tab["content"])} for tab in content["tabs"]],
            }
            return pid
        raise ValueError(f"layout node type {kind!r} has no conversion")

    def split(direction: str, items: list[dict]):
        first, rest = items[0], items[1:]
        if not rest:
            return panel(first["content"])
        weight = lambda item: item.get("proportion", 1)  # noqa: E731
        share = 100.0 * weight(first) / (weight(first) + sum(weight(i) for i in rest))
        return {
            "direction": direction,
            "first": panel(first["content"]),
            "second": split(direction, rest),
            "splitPercentage": share,
        }

    root = panel(foxglove["content"])
    return {
        "configById": config_by_id,
        "globalVariables": {},
        "userNodes": {},
        "playbackConfig": {"speed": 1.0},
        "layout": root,
    }


def plot_config(config: dict, title: str | None) -> dict:
    """A Lichtblick Plot panel's config from the Foxglove app's: the same paths, axes and labels."""
    out = {
        "paths": [
            {"value": p["value"], "label": p.get("label", ""), "enabled": True, "timestampMethod": "receiveTime"}
            for p in config["paths"]
        ],
        "showLegend": config.get("showLegend", True),
        "legendDisplay": "left",
        "showPlotValuesInLegend": False,
        "showXAxisLabels": True,
        "showYAxisLabels": True,
        "isSynced": False,
        "xAxisVal": config.get("xAxisVal", "timestamp"),
        "sidebarDimension": 110,
    }
    if "xAxisPath" in config:
        out["xAxisPath"] = {"value": config["xAxisPath"]["value"], "enabled": True}
    for key in ("xAxisLabel", "yAxisLabel"):
        if key in config:
            out[key] = config[key]
    if title:
        out["lichtblickPanelTitle"] = title
    return out


# --- the viewer, served locally -------------------------------------------------------------------


class _Handler(http.server.SimpleHTTPRequestHandler):
    layout: bytes = b""

    def end_headers(self) -> None:
        # As Lichtblick's own server: cross-origin isolated (its workers share memory).
        self.send_header("Cross-Origin-Opener-Policy", "same-origin")
        self.send_header("Cross-Origin-Embedder-Policy", "credentialless")
        super().end_headers()

    def do_GET(self) -> None:
        if self.path.split("?")[0] == f"/{LAYOUT_NAME}":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(self.layout)))
            self.end_headers()
            self.wfile.write(self.layout)
            return
        super().do_GET()

    def log_message(self, *args) -> None:
        pass


@contextlib.contextmanager
def serve(folder: pathlib.Path, layout: dict):
    """Serves ``folder`` and ``layout`` (at ``/LAYOUT_NAME``) on a free local port; yields the base URL."""
    handler = type("Handler", (_Handler,), {"layout": json.dumps(layout).encode()})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


# --- headless Chromium over the DevTools protocol ---------------------------------------------------


class Browser:
    """A headless Chromium page, driven over the DevTools protocol (a WebSocket, as Playwright does)."""

    def __init__(self, chromium: str, profile: pathlib.Path, width: int, height: int) -> None:
        from websockets.sync.client import connect

        self.process = subprocess.Popen(
            [
                chromium,
                "--headless=new",
                "--no-sandbox",  # as root, Chromium starts only without its sandbox
                "--disable-gpu",
                "--no-first-run",
                "--hide-scrollbars",
                f"--user-data-dir={profile}",
                "--remote-debugging-port=0",
                f"--window-size={width},{height}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        endpoint = None
        deadline = time.monotonic() + 60
        while endpoint is None and time.monotonic() < deadline:
            line = self.process.stderr.readline()
            if not line and self.process.poll() is not None:
                raise RuntimeError(f"chromium exited ({self.process.returncode}) before its DevTools endpoint")
            if m := re.search(r"DevTools listening on (ws://\S+)", line):
                endpoint = m.group(1)
        if endpoint is None:
            raise TimeoutError("chromium gave no DevTools endpoint within 60 s")
        threading.Thread(target=self.process.stderr.read, daemon=True).start()  # keep its pipe drained
        http_base = "http://" + endpoint.split("/", 3)[2]
        with urllib.request.urlopen(f"{http_base}/json/list", timeout=10) as reply:
            page = next(t for t in json.load(reply) if t["type"] == "page")
        self.socket = connect(page["webSocketDebuggerUrl"], max_size=None, proxy=None, ping_interval=None, legacy=True)
        self.ids = itertools.count(1)
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)

    def call(self, method: str, **params):
        """Sends one DevTools command and returns its result (events in between are dropped)."""
        request = next(self.ids)
        self.socket.send(json.dumps({"id": request, "method": method, "params": params}))
        while True:
            reply = json.loads(self.socket.recv(timeout=60))
            if reply.get("id") == request:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]

    def evaluate(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result["result"].get("value")

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.socket.close()
        stop(self.process)


def stop(process: subprocess.Popen, timeout: float = 30) -> None:
    """SIGINT to the process's group (as Ctrl-C), then SIGKILL if it outlives ``timeout``."""
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGINT)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


# --- the run ----------------------------------------------------------------------------------------


def click(browser: Browser, label: str) -> None:
    """Clicks the page's button whose aria-label, or whose text, starts with ``label``."""
    found = browser.evaluate(
        "(() => { const b = [...document.querySelectorAll('button, [role=tab]')].find(e => "
        f"(e.getAttribute('aria-label') || e.innerText || '').startsWith({json.dumps(label)})); "
        "if (b) { b.click(); } return !!b; })()"
    )
    if not found:
        raise RuntimeError(f"the viewer has no button {label!r}")


def wait_for(what: str, condition, timeout: float, poll: float = 1.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout:g} s")
        time.sleep(poll)


def horde_lines(log: pathlib.Path) -> list[str]:
    """The demo's Horde lines that carry a running error (``rmse ... vs mean``)."""
    return [line for line in log.read_text(errors="replace").splitlines() if "horde" in line and "vs mean" in line]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--viewer", type=pathlib.Path, help="the Lichtblick web build (the folder of its index.html)")
    parser.add_argument(
        "--write-layout",
        type=pathlib.Path,
        metavar="PATH",
        help="only write --layout in Lichtblick's format to PATH (for Lichtblick's Import from file), and exit",
    )
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "docs" / "figures" / "live_view_screenshot.png")
    parser.add_argument("--layout", type=pathlib.Path, default=ROOT / "config" / "live_view.json")
    parser.add_argument("--tab", default="shoulder_speed", help="the question whose tab is shown")
    parser.add_argument("--seconds", type=float, default=60.0, help="seconds of the Horde's errors before the shot")
    parser.add_argument("--chromium", default=shutil.which("chromium") or shutil.which("chromium-browser"))
    parser.add_argument("--size", default="1400x900", help="the page's size in pixels, WIDTHxHEIGHT")
    args = parser.parse_args(argv)
    if args.write_layout:
        args.write_layout.write_text(json.dumps(lichtblick_layout(json.loads(args.layout.read_text())), indent=1))
        return 0
    if args.viewer is None or not (args.viewer / "index.html").is_file():
        parser.error(f"--viewer {args.viewer}: no index.html there (build Lichtblick's web app: docs/live-view.md)")
    if not args.chromium:
        parser.error("no chromium on PATH (apt-get install chromium, or give --chromium)")
    width, height = (int(v) for v in args.size.split("x"))
    layout = lichtblick_layout(json.loads(args.layout.read_text()))
    tabs = next(c for c in layout["configById"].values() if "tabs" in c)
    names = [t["title"] for t in tabs["tabs"]]
    if args.tab not in names:
        parser.error(f"--tab {args.tab!r}: the layout's tabs are {names}")
    tabs["activeTabIdx"] = names.index(args.tab)

    from gamma_net_ros.processes import NodeProcess, node_command

    with tempfile.TemporaryDirectory(prefix="live_view_screenshot.") as tmp:
        tmp = pathlib.Path(tmp)
        demo_log = tmp / "demo.log"
        demo = subprocess.Popen(
            [
                *(shutil.which("gamma-net") or "gamma-net",),
                *("demo", "--out", str(tmp / "demo"), "--seconds", str(args.seconds + 600)),
                *("--pretrain-circuits", "0", "--reflex-seconds", "0"),
            ],
            stdout=demo_log.open("w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        view_log = tmp / "live_view.log"
        browser = None
        try:
            with NodeProcess(node_command("gamma_net_ros.live_view", params={"port": 0}), view_log) as view:
                served = lambda: re.search(r"serving (ws://\S+)", view_log.read_text()) or not view.running  # noqa: E731
                wait_for("live_view serving", served, 120)
                if not view.running:
                    raise RuntimeError(f"live_view exited: {view_log.read_text()}")
                ws_url = re.search(r"serving (ws://\S+)", view_log.read_text()).group(1)
                with serve(args.viewer, layout) as base:
                    browser = Browser(args.chromium, tmp / "chromium", width, height)
                    url = f"{base}/?ds=foxglove-websocket&ds.url={ws_url}&layoutUrl={base}/{LAYOUT_NAME}"
                    print(f"[screenshot] opening {url}", flush=True)
                    browser.call("Page.navigate", url=url)

                    def learning() -> bool:
                        if demo.poll() is not None:
                            raise RuntimeError(f"the demo exited ({demo.returncode}):\n{demo_log.read_text()[-3000:]}")
                        return bool(horde_lines(demo_log))

                    wait_for("the Horde's first running errors", learning, 600)
                    print("[screenshot] the Horde publishes its errors; the viewer plots them ...", flush=True)
                    time.sleep(args.seconds)  # the plots fill with this much of the run
                    text = browser.evaluate("document.body.innerText")
                    if re.search(r"Alerts\n\d+", text):  # a channel refused (its schema), a connection lost
                        click(browser, "Alerts")
                        raise RuntimeError(f"the viewer has alerts: {browser.evaluate('document.body.innerText')!r}")
                    if f"{args.tab}: " not in text:
                        raise RuntimeError(f"the page shows no panel of {args.tab!r}: {text[:500]!r}")
                    click(browser, "Hide left sidebar")
                    time.sleep(3)  # the plots take the room
                    shot = browser.call("Page.captureScreenshot", format="png")
                    args.out.parent.mkdir(parents=True, exist_ok=True)
                    args.out.write_bytes(base64.b64decode(shot["data"]))
                    print(f"[screenshot] {args.out} ({args.out.stat().st_size // 1024} kB)", flush=True)
                    print(f"[screenshot] demo: {horde_lines(demo_log)[-1]}", flush=True)
        finally:
            if browser is not None:
                browser.close()
            stop(demo, timeout=60)
    return 0


if __name__ == "__main__":
    sys.exit(main())
