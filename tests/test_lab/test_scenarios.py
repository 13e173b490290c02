"""`lab.scenarios.run_scenarios` on the session broker: a scenario that fails closes the members it
opened at once. Before, they polled until the session's lab closed -- in one CI run a kafka-python
member host of a failed scenario spun at 84% of a core for the rest of the run."""

from __future__ import annotations

from typing import Any

import pytest

from lab import scenarios as sc
from lab.members import RemoteMember


def test_a_failed_scenarios_members_are_closed_when_it_fails(lab: Any) -> None:
    opened: list[Any] = []
    before = lab.member(
        lab.name("kept"), [lab.topic("kept-t", partitions=1)], client="kafka-python", name="kept"
    )

    @sc.scenario("failing_for_test", default=False)
    def failing(lab: Any) -> Any:
        topic = lab.topic("fail-t", partitions=1)
        opened.append(lab.member(lab.name("fail"), [topic], client="kafka-python", name="fail"))
        opened.append(lab.member(lab.name("fail-c"), [topic], name="fail-c"))  # confluent, in process
        raise RuntimeError("the scenario failed")

    try:
        with pytest.raises(RuntimeError, match="the scenario failed"):
            sc.run_scenarios(lab, ["failing_for_test"])
        remote, local = opened
        assert isinstance(remote, RemoteMember) and remote.proc.poll() is not None
        assert not local.alive
        # what was open before the scenario stays open
        assert before.alive and before in lab._closables
    finally:
        del sc.SCENARIOS["failing_for_test"]
        before.close()
