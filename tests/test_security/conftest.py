"""Users, ACLs and settings on the session broker's secured listeners (`lab.broker`, secured=True).

Users are created for real (SCRAM credentials through the Admin API, client certificates from the
broker's CA); ACLs are granted through the Admin API by the PLAINTEXT super user.  Every test uses
its own user names, so no test's grants leak into another's.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.security import Security


@pytest.fixture(scope="session")
def security(kafka: Any) -> Security:
    return Security(kafka)
