"""The chart and image tests' tools: helm, kubeconform and hadolint from .tools/ (`make chart-tools`),
and a renderer that runs the real helm binary.

A missing tool or schema store FAILS the test (never skips), like every other test bench piece.
"""

from __future__ import annotations

import pytest

from tests.support.helm import (
    Helm,
    Kubeconform,
)


@pytest.fixture(scope="session")
def helm() -> Helm:
    return Helm()


@pytest.fixture(scope="session")
def kubeconform() -> Kubeconform:
    return Kubeconform()
