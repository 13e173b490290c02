"""The web UI (issue 37): what the HTTP server needs to serve it -- its pages and static files
(`streaming/serving/ui/`, package data: plain HTML, CSS and ES modules, no build step, nothing
fetched from the internet), the Content-Security-Policy they are served with, and ``GET /ui/config``
(what the pages need to know of the mirror: the clusters' names, the lag interval they poll at,
Grafana's base URL).

Everything a page shows comes from the JSON API the scripts use (``/groups``, ``/groups/{id}``,
``.../lag``, ``.../timeline``, ``.../history``, Burrow's ``/v3/kafka/...``): the pages only lay it
out.  Every value reaches the document as text (``textContent``, attributes set through the DOM),
never as markup; the policy forbids inline scripts and any origin but the mirror's own, so an id
holding HTML can neither run nor load anything.  docs/ui.md describes the pages.
"""

from __future__ import annotations

import hashlib
import mimetypes
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Final

from streaming.settings import Settings

UI_DIR: Final = Path(__file__).with_name("ui")
ASSETS_DIR: Final = UI_DIR / "assets"
#: the pages: path under /ui -> file in UI_DIR
PAGES: Final = {"groups": "groups.html", "group": "group.html"}
#: the UI's responses may load scripts, styles, images and data from the mirror's own origin only,
#: run no inline script or style, be framed by nobody, and send forms nowhere else
CONTENT_SECURITY_POLICY: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
UI_HEADERS: Final = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}
#: the generated dashboards the pages link to (uid, its variables): tests/test_streaming/
#: test_serving/test_ui.py keeps these equal to dashboards/grafana/*.json
GRAFANA_DASHBOARDS: Final = {
    "group": "coordinator-mirror-group",
    "insights": "coordinator-mirror-insights",
}
_TYPES: Final = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}


@dataclass(frozen=True)
class Asset:
    body: bytes
    content_type: str
    etag: str


def _load(path: Path) -> Asset:
    body = path.read_bytes()
    content_type = _TYPES.get(path.suffix) or mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    if content_type.startswith("text/") and "charset" not in content_type:
        content_type += "; charset=utf-8"
    return Asset(body, content_type, '"' + hashlib.sha256(body).hexdigest()[:32] + '"')


def load_assets(root: Path = ASSETS_DIR) -> dict[str, Asset]:
    """Every file under ``root`` by its path relative to it (read once: the set a request may
    name, so no path from a request ever reaches the file system)."""
    return {p.relative_to(root).as_posix(): _load(p) for p in sorted(root.rglob("*")) if p.is_file()}


def load_pages(root: Path = UI_DIR) -> dict[str, Asset]:
    return {name: _load(root / file) for name, file in PAGES.items()}


def _version() -> str | None:
    try:
        return version("coordinator-mirror")
    except PackageNotFoundError:  # a checkout without the package installed
        return None


@dataclass
class UiContext:
    """What the UI's routes read: its files and the settings the pages show (the groups, their lag
    history and Burrow's statuses are each cluster's: `streaming.serving.api.ClusterView`)."""

    enabled: bool = True
    lag_interval_s: float | None = None
    lag_history_minutes: int = 60
    grafana_url: str | None = None
    timeline_events_per_group: int = 50
    assets: dict[str, Asset] = field(default_factory=load_assets)
    pages: dict[str, Asset] = field(default_factory=load_pages)

    @classmethod
    def from_settings(cls, s: Settings) -> UiContext:
        return cls(
            enabled=s.http_ui,
            lag_interval_s=s.lag_interval_s if s.lag_enabled and s.source == "kafka" else None,
            lag_history_minutes=s.lag_history_minutes,
            grafana_url=s.grafana_url,
            timeline_events_per_group=s.timeline_events_per_group,
        )

    def config(self, clusters: list[str]) -> dict[str, Any]:
        """``GET /ui/config`` (``clusters``: the mirrored clusters' names, in the settings' order)."""
        return {
            "cluster": clusters[0],
            "clusters": clusters,
            "lag_interval_s": self.lag_interval_s,
            "lag_history_minutes": self.lag_history_minutes,
            "timeline_events_per_group": self.timeline_events_per_group,
            "grafana_url": self.grafana_url,
            "grafana_dashboards": dict(GRAFANA_DASHBOARDS) if self.grafana_url else None,
            "version": _version(),
        }
