"""Reconciliation with the coordinators: the mirrored groups against Admin ListGroups.

The two-round rule: a group missing on one side in two rounds in a row is a mismatch (an
in-flight commit or tombstone is mirrored within a round, so one round alone proves nothing):
metric, event, and -- missing in the coordinator -- ``exists: false``.  A partial answer (a
coordinator still loading) or a principal that may not list every group does not count.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

from state.events import ReconcileMismatch
from streaming.app.driver_events import DriverEvents
from streaming.app.errors import first_line
from streaming.cluster.groups import GroupListing
from streaming.serving.status import MirrorStatus
from streaming.serving.store import SnapshotStore

log = logging.getLogger("coordinator_mirror")

SIDES = ("missing_in_coordinator", "missing_in_mirror")


class GroupLister(Protocol):
    """What a round asks of the cluster (`streaming.cluster.groups.ClusterClient`)."""

    def may_list_every_group(self) -> bool: ...
    def list_groups(self) -> GroupListing: ...


class Reconciler:
    def __init__(
        self,
        cluster: GroupLister,
        store: SnapshotStore,
        status: MirrorStatus,
        events: DriverEvents,
        clock_ms: Callable[[], int],
    ) -> None:
        self.cluster = cluster
        self.store = store
        self.status = status
        self.events = events
        self.clock_ms = clock_ms
        #: the previous round: side -> group ids (a mismatch must persist a round)
        self.suspects: dict[str, set[str]] = {}

    def round(self) -> bool:
        """One round; True if it counted."""
        status = self.status
        try:
            complete = self.cluster.may_list_every_group()
            listing = self.cluster.list_groups() if complete else None
        except Exception as exc:
            status.reconciled("error", None, None)
            log.warning("reconciliation: ListGroups failed: %s", first_line(str(exc)))
            return False
        if listing is None:
            # the coordinators would leave out every group the principal may not Describe, and
            # those would look deleted: no round rather than a wrong one
            if not status.reconcile_rounds("not_authorized"):
                log.warning(
                    "reconciliation is off: the mirror's principal may not Describe the cluster, so "
                    "ListGroups would leave out the groups it may not Describe -- grant Cluster "
                    "Describe (docs: Security, ACLs) or set reconcile_interval_s=0"
                )
            status.reconciled("not_authorized", None, None)
            return False
        if not listing.complete:
            status.reconciled("error", None, None)
            log.info("reconciliation: partial answer (%s); round skipped", "; ".join(listing.errors))
            return False
        mine = self.store.group_ids() - self.store.gone_ids()
        known = status.mismatches()
        theirs = set(listing.groups)
        now_ms = self.clock_ms()
        seen = {"missing_in_coordinator": mine - theirs, "missing_in_mirror": theirs - mine}
        confirmed = {side: ids & self.suspects.get(side, set()) for side, ids in seen.items()}
        self.suspects = seen
        events = []
        for side, ids in confirmed.items():
            for gid in sorted(ids - known.get(side, frozenset())):
                events.append(ReconcileMismatch(gid, None, None, None, side=side, at_ms=now_ms).to_json())
                if side == "missing_in_coordinator":
                    self.store.mark_gone(
                        gid,
                        {
                            "reason": "the coordinator no longer lists this group (Admin ListGroups, "
                            "two rounds in a row): its tombstone was probably compacted away while "
                            "the mirror was not reading",
                            "since_ms": now_ms,
                        },
                    )
        # groups marked gone stay counted until a record for them arrives
        confirmed["missing_in_coordinator"] |= self.store.gone_ids()
        status.reconciled("ok", confirmed, now_ms)
        if events:
            log.warning(
                "reconciliation: %d group(s) differ from the coordinators' list (%s)",
                len(events),
                ", ".join(f"{e['group_id']}: {e['side']}" for e in events[:5]),
            )
            status.add_tallies({("event", "reconcile_mismatch"): len(events)})
            self.events.write(events, now_ms)
        return True
