"""Toxiproxy (Shopify's TCP fault proxy) in front of a local broker: a WAN link's latency, or a
network partition, between a client and a cluster on loopback, where this machine has no netem.

The bench uses it (`python -m bench --wan`); set_enabled() cuts a link, for fault drills. A broker
behind it listens twice: its own listener, for everything local (seeding, checks), and a second
one that advertises the proxy's port, so a client that bootstraps through the proxy also fetches
and produces through it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mirror.errors import LocalClusterError
from mirror.local.ports import HOST, free_port

TOXIPROXY_VERSION = "v2.5.0"
INSTALL = f"go install github.com/Shopify/toxiproxy/v2/cmd/server@{TOXIPROXY_VERSION}"
WAN_LISTENER = "WAN"
_START_SECONDS = 30.0


def server_binary() -> Path:
    """The toxiproxy server: $TOXIPROXY_SERVER, `toxiproxy-server` on PATH, or what `go install`
    built (named `server`, in $GOBIN or $GOPATH/bin)."""
    named = os.environ.get("TOXIPROXY_SERVER") or shutil.which("toxiproxy-server")
    candidates = [Path(named)] if named else []
    go_bin = os.environ.get("GOBIN") or str(Path(os.environ.get("GOPATH", Path.home() / "go")) / "bin")
    candidates.append(Path(go_bin) / "server")
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    raise LocalClusterError(
        f"no toxiproxy server found (looked for $TOXIPROXY_SERVER, toxiproxy-server on PATH, "
        f"{candidates[-1]}); build it with `{INSTALL}`"
    )


def wan_listener(port: int, controller_port: int, wan_port: int, proxy_port: int) -> dict[str, str]:
    """Broker settings (BrokerSpec.overrides) for one plaintext node that also listens on `wan_port`
    and advertises `proxy_port` there: the proxy forwards proxy_port to wan_port."""
    return {
        "listeners": (
            f"PLAINTEXT://{HOST}:{port},{WAN_LISTENER}://{HOST}:{wan_port},CONTROLLER://{HOST}:{controller_port}"
        ),
        "advertised.listeners": f"PLAINTEXT://{HOST}:{port},{WAN_LISTENER}://{HOST}:{proxy_port}",
        "listener.security.protocol.map": (
            f"PLAINTEXT:PLAINTEXT,{WAN_LISTENER}:PLAINTEXT,CONTROLLER:PLAINTEXT"
        ),
    }


@dataclass(frozen=True)
class Proxy:
    """One proxied link: clients connect to `listen_port`, it forwards to `upstream_port`."""

    name: str
    listen_port: int
    upstream_port: int

    @property
    def address(self) -> str:
        return f"{HOST}:{self.listen_port}"


class Toxiproxy:
    """A toxiproxy server process with its REST API on a free loopback port."""

    def __init__(self, log_file: Path) -> None:
        self.api_port = free_port()
        command = [str(server_binary()), "-host", HOST, "-port", str(self.api_port)]
        log_file.parent.mkdir(parents=True, exist_ok=True)
        self._log = log_file.open("ab")
        self._process = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT)
        try:
            self._wait_until_answering(log_file)
        except BaseException:
            self.stop()
            raise

    def _wait_until_answering(self, log_file: Path) -> None:
        deadline = time.monotonic() + _START_SECONDS
        while True:
            try:
                self._call("GET", "/version")
                return
            except OSError as exc:
                if self._process.poll() is not None or time.monotonic() > deadline:
                    raise LocalClusterError(
                        f"toxiproxy did not start on {HOST}:{self.api_port} ({exc}); see {log_file}"
                    ) from exc
                time.sleep(0.1)

    def proxy(self, name: str, upstream_port: int, listen_port: int | None = None) -> Proxy:
        """A new proxy to 127.0.0.1:`upstream_port`."""
        proxy = Proxy(name, listen_port or free_port(), upstream_port)
        self._call(
            "POST",
            "/proxies",
            {"name": name, "listen": proxy.address, "upstream": f"{HOST}:{upstream_port}", "enabled": True},
        )
        return proxy

    def add_latency(self, proxy: Proxy, one_way_ms: int, jitter_ms: int = 0) -> None:
        """`one_way_ms` each way: a round trip through the proxy takes twice that longer."""
        for stream in ("upstream", "downstream"):
            self._call(
                "POST",
                f"/proxies/{proxy.name}/toxics",
                {
                    "name": f"latency-{stream}",
                    "type": "latency",
                    "stream": stream,
                    "attributes": {"latency": one_way_ms, "jitter": jitter_ms},
                },
            )

    def set_enabled(self, proxy: Proxy, enabled: bool) -> None:
        """Disabled, the proxy closes its connections and refuses new ones: a network partition."""
        self._call("POST", f"/proxies/{proxy.name}", {"enabled": enabled})

    def black_hole(self, proxy: Proxy, on: bool) -> None:
        """On, every byte either way is dropped and no connection is closed, new ones included: a
        network partition as a WAN link has it, where requests time out rather than fail at once.
        Off, Toxiproxy closes the connections the toxic held (their bytes are lost) and lets new
        ones through: clients connect anew."""
        for stream in ("upstream", "downstream"):
            name = f"black-hole-{stream}"
            if on:
                toxic = {"name": name, "type": "timeout", "stream": stream, "attributes": {"timeout": 0}}
                self._call("POST", f"/proxies/{proxy.name}/toxics", toxic)
            else:
                self._call("DELETE", f"/proxies/{proxy.name}/toxics/{name}")

    def stop(self) -> None:
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._log.close()

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            f"http://{HOST}:{self.api_port}{path}",
            data=data,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
                text = response.read()
                is_json = "json" in response.headers.get("Content-Type", "")
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace").strip()
            raise LocalClusterError(f"toxiproxy {method} {path}: HTTP {exc.code} {detail}") from exc
        return json.loads(text) if text and is_json else text.decode(errors="replace")
