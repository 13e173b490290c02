"""The process around the pure core, in three rooms over one settings model (ARCHITECTURE.md).

``app`` (composition root and commands) -> ``pipeline`` (Spark) -> ``serving`` (store, HTTP,
metrics; no Spark) -> ``settings``; the layering is checked by import-linter (pyproject.toml).
"""
