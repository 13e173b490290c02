"""The state layer's one configuration (Kafka: OffsetConfig): offsets retention, expiry semantics, grace.

Built once by the application from its settings and passed down to replay, expiry and rendering."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

SEMANTICS_4X: Final = "4.x"
SEMANTICS_3X: Final = "2.1-3.x"
SEMANTICS_LEGACY: Final = "<=2.0"
SEMANTICS: Final = (SEMANTICS_4X, SEMANTICS_3X, SEMANTICS_LEGACY)

DEFAULT_RETENTION_MS: Final = 7 * 24 * 3600 * 1000  # offsets.retention.minutes = 10080 since 2.0 (KIP-186)
DEFAULT_CHECK_INTERVAL_MS: Final = 600_000  # offsets.retention.check.interval.ms


@dataclass(frozen=True, slots=True)
class OffsetConfig:
    """``retention_ms`` is the cluster's ``offsets.retention.minutes`` in ms; ``semantics`` which
    generation of Kafka's expiry rules applies (spec §6); ``confirm_grace_ms`` how long after the
    mirror's own expiry the broker's tombstone may take before it counts as a disagreement -- the
    broker sweeps every ``offsets.retention.check.interval.ms``, so the default is that interval
    plus a minute of slack (appends, clock skew between the broker and this process)."""

    retention_ms: int = DEFAULT_RETENTION_MS
    semantics: str = SEMANTICS_4X
    confirm_grace_ms: int = DEFAULT_CHECK_INTERVAL_MS + 60_000

    def __post_init__(self) -> None:
        if self.semantics not in SEMANTICS:
            raise ValueError(f"semantics: {self.semantics!r} is not one of {SEMANTICS}")
        if self.retention_ms <= 0:
            raise ValueError(f"retention_ms: must be > 0, got {self.retention_ms}")
        if self.confirm_grace_ms < 0:
            raise ValueError(f"confirm_grace_ms: must be >= 0, got {self.confirm_grace_ms}")


DEFAULT_CONFIG: Final = OffsetConfig()
