"""Generate the Grafana dashboards and the Prometheus alert rules, and the Helm chart's copies
(``make dashboards``).

    .venv/bin/python -m dashboards.build             # write grafana/*.json + prometheus/alerts.yaml
                                                     # + the chart's files/ (dashboards, rule template)
    .venv/bin/python -m dashboards.build --check     # exit 1 if the committed files differ
    .venv/bin/python -m dashboards.build --rules-out my-alerts.yaml \\
        --set storm_rebalances=10 --set storm_window=15m   # your thresholds (dashboards/rules.py)
    .venv/bin/python -m dashboards.build --rules-out my-alerts.yaml --thresholds thresholds.yaml

The committed rules carry the documented defaults; ``--rules-out`` writes a copy with overrides
(thresholds file: a YAML/JSON mapping of `Thresholds` field names to values, ``--set`` wins).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(HERE.parent))

from dashboards.compat import rules_yaml as compat_rules_yaml  # noqa: E402
from dashboards.grafana import to_json  # noqa: E402
from dashboards.panels import DASHBOARDS  # noqa: E402
from dashboards.rules import Thresholds, rules_template, rules_yaml  # noqa: E402

GRAFANA_DIR = HERE / "grafana"
RULES_FILE = HERE / "prometheus" / "alerts.yaml"
#: the peers' metric names as recording rules (dashboards/compat.py)
COMPAT_RULES_FILE = HERE / "prometheus" / "compat-rules.yaml"
#: Helm reads only files inside the chart: the dashboards' copies and the rules with tokens
CHART_FILES = HERE.parent / "helm" / "coordinator-mirror" / "files"
CHART_DASHBOARDS = CHART_FILES / "dashboards"
CHART_RULES = CHART_FILES / "alert-rules.yaml"


def generated() -> dict[Path, str]:
    """Every generated file (path -> content) with the default thresholds."""
    out = {GRAFANA_DIR / name: to_json(build()) for name, build in DASHBOARDS.items()}
    out.update({CHART_DASHBOARDS / name: out[GRAFANA_DIR / name] for name in DASHBOARDS})
    out[RULES_FILE] = rules_yaml(Thresholds())
    out[COMPAT_RULES_FILE] = compat_rules_yaml()
    out[CHART_RULES] = rules_template()
    return out


def _show(path: Path) -> str:
    return str(path.relative_to(HERE.parent)) if path.is_relative_to(HERE.parent) else str(path)


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    values: dict[str, Any] = {}
    if args.thresholds:
        import yaml

        loaded = yaml.safe_load(Path(args.thresholds).read_text()) or {}
        if not isinstance(loaded, dict):
            raise SystemExit(f"{args.thresholds}: expected a mapping of threshold names to values")
        values.update(loaded)
    for item in args.set or ():
        name, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--set {item}: expected NAME=VALUE")
        values[name.strip()] = value.strip()
    return values


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m dashboards.build", description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true", help="compare with the committed files, write nothing")
    p.add_argument("--rules-out", help="write the rules with --set/--thresholds overrides to this file")
    p.add_argument("--set", action="append", metavar="NAME=VALUE", help="override one threshold")
    p.add_argument("--thresholds", help="YAML/JSON file of threshold overrides")
    args = p.parse_args(argv)

    if args.rules_out:
        try:
            thresholds = Thresholds.with_overrides(_overrides(args))
        except (TypeError, ValueError) as exc:
            print(f"invalid thresholds: {exc}", file=sys.stderr)
            return 2
        Path(args.rules_out).write_text(rules_yaml(thresholds))
        print(f"wrote {args.rules_out}")
        return 0
    if args.set or args.thresholds:
        print("--set/--thresholds need --rules-out (the committed rules keep the defaults)", file=sys.stderr)
        return 2

    files = generated()
    extra = [p for d in (GRAFANA_DIR, CHART_DASHBOARDS) for p in sorted(d.glob("*.json")) if p not in files]
    for path in extra:  # a dashboard that is no longer generated
        if not args.check:
            path.unlink()
            print(f"removed {_show(path)}")
    stale = list(extra)
    for path, content in files.items():
        current = path.read_text() if path.exists() else None
        if current == content:
            continue
        stale.append(path)
        if not args.check:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content)
            print(f"wrote {_show(path)}")
    if args.check and stale:
        names = ", ".join(_show(s) for s in stale)
        print(f"out of date: {names} (run `make dashboards`)", file=sys.stderr)
        return 1
    if not stale:
        print("dashboards and rules are up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
