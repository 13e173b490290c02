"""Grafana dashboards and Prometheus alert rules generated from the metric catalogue.

`python -m dashboards.build` (``make dashboards``) writes grafana/*.json and prometheus/alerts.yaml.
"""
