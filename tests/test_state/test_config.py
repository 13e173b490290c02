"""The state layer's one configuration (`state.config.OffsetConfig`): Kafka's defaults, and a value
the rules cannot use refused with the field's name."""

from __future__ import annotations

import pytest

from state.config import DEFAULT_CONFIG, SEMANTICS, OffsetConfig


def test_the_defaults_are_kafkas() -> None:
    """``offsets.retention.minutes`` = 10080 (7 days, KIP-186) and a grace of the broker's sweep
    interval (``offsets.retention.check.interval.ms`` = 600000) plus a minute."""
    assert OffsetConfig() == DEFAULT_CONFIG
    assert DEFAULT_CONFIG.retention_ms == 10080 * 60 * 1000
    assert DEFAULT_CONFIG.semantics == "4.x"
    assert DEFAULT_CONFIG.confirm_grace_ms == 600_000 + 60_000
    assert SEMANTICS == ("4.x", "2.1-3.x", "<=2.0")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"semantics": "3.x"}, "semantics: '3.x' is not one of"),
        ({"semantics": ""}, "semantics: '' is not one of"),
        ({"retention_ms": 0}, "retention_ms: must be > 0, got 0"),
        ({"retention_ms": -1}, "retention_ms: must be > 0, got -1"),
        ({"confirm_grace_ms": -1}, "confirm_grace_ms: must be >= 0, got -1"),
    ],
)
def test_a_value_the_rules_cannot_use_is_refused_naming_it(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        OffsetConfig(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("semantics", SEMANTICS)
def test_every_generation_of_the_rules_and_the_edges_are_accepted(semantics: str) -> None:
    c = OffsetConfig(retention_ms=1, semantics=semantics, confirm_grace_ms=0)
    assert (c.retention_ms, c.semantics, c.confirm_grace_ms) == (1, semantics, 0)
    with pytest.raises(AttributeError):
        c.retention_ms = 2  # type: ignore[misc]  # frozen: one configuration for the whole fold
