"""The session broker's secured listeners as the security suites use them: ACLs (those README and
docs/security.md tell users to grant) and clients of every mechanism."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: the page whose ACL table the tests grant (between its acl-table markers)
SECURITY_DOC = Path(__file__).resolve().parents[2] / "docs" / "security.md"


@dataclass(frozen=True)
class Acl:
    """One row of the ACL table: allow ``operation`` on the ``resource`` named ``name`` (literal)."""

    resource: str  # Topic | Group | Cluster
    name: str
    operation: str  # Read | Write | Describe | Create ...
    prefixed: bool = False  # a PREFIXED resource pattern (docs/security.md: "Group (prefixed)")

    def label(self) -> str:
        return f"{self.resource}:{self.name}:{self.operation}"


def readme_acls(events_topic: str, offsets_topic: str) -> list[Acl]:
    """The ACL table of docs/security.md (between the acl-table markers), with the output topics'
    placeholders filled in: what the tests grant IS what the docs say."""
    text = SECURITY_DOC.read_text()
    block = text.split("<!-- acl-table -->", 2)[1]
    acls = []
    for line in block.splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if len(cells) < 4 or cells[0] in ("resource", "") or set(cells[0]) <= {"-"}:
            continue
        name = cells[1].replace("<events_topic>", events_topic).replace("<offsets_topic>", offsets_topic)
        resource, _, pattern = cells[0].partition(" (")
        acls.append(Acl(resource, name, cells[2], prefixed=pattern.startswith("prefixed")))
    return acls


def doc_feature_acls() -> list[Acl]:
    """The feature ACLs of docs/security.md (between the acl-features markers): what lag and the
    reconciliation need beyond the required rows.  The name is the cell's first `quoted` name."""
    block = SECURITY_DOC.read_text().split("<!-- acl-features -->", 2)[1]
    acls = []
    for line in block.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 4 or cells[0] in ("resource", "") or set(cells[0]) <= {"-"}:
            continue
        name = re.search(r"`([^`]+)`", cells[1])
        assert name is not None, line
        acls.append(Acl(cells[0], name.group(1), cells[2]))
    return acls


class Security:
    """Admin operations on the secured session broker (over PLAINTEXT, as the super user)."""

    def __init__(self, kafka: Any) -> None:
        from confluent_kafka.admin import AdminClient

        self.kafka = kafka
        self.admin = AdminClient({"bootstrap.servers": kafka.bootstrap, "log_level": 0})

    def scram_user(self, name: str, password: str) -> None:
        from confluent_kafka.admin import (
            ScramCredentialInfo,
            ScramMechanism,
            UserScramCredentialUpsertion,
        )

        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
        futures = self.admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion(name, info, password.encode())]
        )
        for f in futures.values():
            f.result(timeout=30)

    def bindings(self, principal: str, acls: Iterable[Acl]) -> list[Any]:
        from confluent_kafka.admin import (
            AclBinding,
            AclOperation,
            AclPermissionType,
            ResourcePatternType,
            ResourceType,
        )

        out = []
        for acl in acls:
            # Kafka's "Cluster" resource is librdkafka's BROKER type (named kafka-cluster)
            rtype = ResourceType["BROKER" if acl.resource == "Cluster" else acl.resource.upper()]
            name = "kafka-cluster" if rtype == ResourceType.BROKER else acl.name
            out.append(
                AclBinding(
                    rtype,
                    name,
                    ResourcePatternType.PREFIXED if acl.prefixed else ResourcePatternType.LITERAL,
                    f"User:{principal}",
                    "*",
                    AclOperation[re.sub(r"(?<!^)(?=[A-Z])", "_", acl.operation).upper()],
                    AclPermissionType.ALLOW,
                )
            )
        return out

    def grant(self, principal: str, acls: Iterable[Acl]) -> None:
        for f in self.admin.create_acls(self.bindings(principal, acls)).values():
            f.result(timeout=30)

    def create_topic(self, name: str, *, compacted: bool = False) -> None:
        from confluent_kafka.admin import NewTopic

        config = {"cleanup.policy": "compact"} if compacted else {}
        for f in self.admin.create_topics([NewTopic(name, 3, 1, config=config)]).values():
            try:
                f.result(timeout=30)
            except Exception as exc:
                if "TOPIC_ALREADY_EXISTS" not in str(exc):
                    raise

    def count_records(self, topic: str, timeout_s: float = 30.0) -> int:
        """Records in ``topic`` (read as the super user over PLAINTEXT)."""
        from confluent_kafka import Consumer, TopicPartition

        c = Consumer({"bootstrap.servers": self.kafka.bootstrap, "group.id": "cm-security-check"})
        try:
            md = c.list_topics(topic, timeout=timeout_s)
            total = 0
            for p in md.topics[topic].partitions:
                low, high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s)
                total += high - low
            return total
        finally:
            c.close()
