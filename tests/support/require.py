"""Fail, never skip, when a real part of the test bench is missing (CI=true also fails a run that skipped)."""

from __future__ import annotations

import os

import pytest

CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def require(condition: bool, what: str) -> None:
    """Fail (never skip) when a real part of the test bench is missing."""
    if not condition:
        pytest.fail(f"missing test dependency: {what} (run `make setup`)", pytrace=False)
