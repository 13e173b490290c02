"""The one settings model of the mirror: flags, environment and an optional file, validated at start.

Precedence (highest first): command-line flags, environment variables ``CM_<NAME>`` (nested maps
with ``__``, e.g. ``CM_KAFKA_OPTIONS__SECURITY_PROTOCOL=SASL_SSL`` -- or JSON:
``CM_KAFKA_OPTIONS='{"security.protocol": "SASL_SSL"}'``), the settings file (``--config FILE``,
YAML or JSON, or ``CM_CONFIG_FILE``), then the defaults below.  Field names are the names the Helm
chart's values use; an invalid setting fails at start with its name.
"""

from __future__ import annotations

import itertools
import json
import os
import re
from collections.abc import Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from state.config import OffsetConfig

#: every setting NAME is also the environment variable CM_<NAME>
ENV_PREFIX = "CM_"
#: names the settings file when --config is not given
CONFIG_ENV = "CM_CONFIG_FILE"

#: Spark options that would change the mirror's semantics or break it; the source sets them itself.
FORBIDDEN_KAFKA_OPTIONS = frozenset(
    {
        "bootstrap.servers",  # use bootstrap_servers
        "isolation.level",  # the mirror must read read_committed, like the coordinator materialises
        "group.id",
        "auto.offset.reset",
        "enable.auto.commit",
        "key.deserializer",
        "value.deserializer",
        "interceptor.classes",
    }
)

ExpirySemantics = Literal["4.x", "2.1-3.x", "<=2.0"]


class SettingsError(ValueError):
    """Invalid settings; ``str()`` names every offending setting."""


class Settings(BaseSettings):
    """Everything ``coordinator-mirror run`` can be told.  Defaults suit a local test cluster."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        extra="forbid",
        frozen=True,
        validate_default=True,
    )

    # -- source ---------------------------------------------------------------------------------
    source: Literal["kafka", "capture"] = Field(
        "kafka", description="read the live `__consumer_offsets` topic, or replay a capture file"
    )
    bootstrap_servers: str | None = Field(None, description="Kafka bootstrap servers (source=kafka)")
    kafka_options: dict[str, str] = Field(
        default_factory=dict,
        description="Kafka (Java) client options, verbatim, for every client of the mirror: Spark's Kafka "
        "source (as kafka.<key>), the driver's reads, the output topics' default, capture (SASL/SSL: "
        "security.protocol, sasl.mechanism, sasl.jaas.config, ssl.truststore.location, ...)",
    )
    kafka_client_java_options: list[str] = Field(
        default_factory=list,
        description="JVM options for every JVM running the mirror's Kafka clients -- the driver's client "
        "JVM, capture's, Spark's driver and executors (e.g. -Djava.security.krb5.conf=/etc/krb5.conf "
        "for GSSAPI)",
    )
    kafka_plugin_jars: list[str] = Field(
        default_factory=list,
        description="jars of Kafka client plugins the options name -- login modules, callback handlers, "
        "config providers (e.g. aws-msk-iam-auth-<v>-all.jar for AWS_MSK_IAM) -- for Spark's source and "
        "the driver's clients alike",
    )
    capture_path: Path | None = Field(None, description="capture file to replay (source=capture)")
    topic: str = Field("__consumer_offsets", description="the coordinator's topic (renaming it is unusual)")
    max_offsets_per_trigger: int = Field(
        5_000_000,
        gt=0,
        description="records per micro-batch at most (initial backfill pacing): every micro-batch "
        "pays the stateful step once per group it touches, so a backfill wants few, large batches; "
        "memory does not grow with it (the topic is streamed, decoded in chunks, one row per group "
        "crosses the shuffle)",
    )
    backfill: Literal["driver", "query"] = Field(
        "driver",
        description="who folds a new checkpoint's backfill (source=kafka): 'driver' reads "
        "__consumer_offsets with Kafka's consumer and folds it with the query's own code while Spark "
        "starts, then starts the query where that read ended with every group's state as its first "
        "batch's seed (served complete ~2x sooner at 1 M records; live commits resume after that "
        "seed batch: docs/performance.md); 'query' folds it in the query's first micro-batch.  A "
        "failed driver fold falls back to 'query'; an existing checkpoint resumes either way",
    )
    preview: bool = Field(
        True,
        description="the driver follows __consumer_offsets itself (source=kafka) and folds each new "
        "record into the group's served state with the query's own code as soon as it is written, "
        "before the micro-batch that reads it: GET /groups and /metrics show a commit within ~0.1 s "
        "of its write, also during a long batch (a big backfill's seed batch); the batch then "
        "confirms the state, and its change events, the offsets feed and lag follow with it "
        "(docs/operating.md). Off: the served state changes only when a micro-batch ends",
    )
    trigger_interval_s: float = Field(
        0.5,
        gt=0,
        description="micro-batch trigger interval, seconds: how often the query looks for new "
        "records; 0.5 keeps commit -> visible under ~2 s (p99, 500 commits/s over 10k groups on 2 "
        "cores).  With no new records it runs no micro-batch (an expiry deadline due wakes it: "
        "docs/operating.md), so a quiet cluster costs little at any interval; a checkpoint made "
        "before the expiry wake runs one every trigger",
    )
    source_tasks: int | None = Field(
        None,
        gt=0,
        description="Spark tasks reading the topic per micro-batch (default: the cluster's cores); "
        "each task costs ~0.1 s of fixed overhead, so one per __consumer_offsets partition is "
        "slow when partitions outnumber cores",
    )

    # -- state and semantics --------------------------------------------------------------------
    checkpoint_location: str = Field(
        "var/checkpoint", description="local path or any Hadoop filesystem URI (s3a://, gs://, abfs://)"
    )
    shuffle_partitions: int = Field(
        4,
        gt=0,
        description="state partitions; FROZEN into the checkpoint at the first run -- choose ~2-4x the "
        "executor cores",
    )
    offsets_retention_minutes: int = Field(
        10080, gt=0, description="the cluster's offsets.retention.minutes (Kafka default 7 days)"
    )
    offsets_retention_check_interval_ms: int = Field(
        600_000,
        gt=0,
        description="the cluster's offsets.retention.check.interval.ms: how late the broker's expiry "
        "tombstones may come after the mirror's deadline before it counts a disagreement",
    )
    default_server_assignor: str = Field(
        "uniform",
        description="the cluster's first group.consumer.assignors entry: what KIP-848 groups use "
        "when no member names an assignor (the log does not record it)",
    )
    expiry_semantics: ExpirySemantics = Field(
        "4.x", description="which Kafka generation's expiry rules the cluster runs: 4.x, 2.1-3.x, <=2.0"
    )

    # -- outputs --------------------------------------------------------------------------------
    events_topic: str | None = Field(
        None, description="Kafka topic for JSON change events (keyed by group id)"
    )
    events_path: Path | None = Field(None, description="directory for JSON-lines change events")
    offsets_topic: str | None = Field(
        None, description="compacted Kafka topic of committed offsets for lag monitoring"
    )
    output_bootstrap_servers: str | None = Field(
        None, description="cluster for events_topic/offsets_topic (default: bootstrap_servers)"
    )
    output_kafka_options: dict[str, str] = Field(
        default_factory=dict,
        description="producer options for the output topics (default: kafka_options, but only when "
        "the output cluster is the source cluster -- see output_inherit_kafka_options)",
    )
    output_inherit_kafka_options: bool = Field(
        False,
        description="send kafka_options (the source cluster's credentials) to a different "
        "output_bootstrap_servers when output_kafka_options is empty; off: such a setup fails at start",
    )

    # -- serving --------------------------------------------------------------------------------
    http_host: str = Field("127.0.0.1", description="HTTP API / metrics bind address")
    http_port: int = Field(8080, ge=0, le=65535, description="HTTP API / metrics port (0 = any free port)")
    cluster_name: str = Field("default", min_length=1, description="cluster_name label on every metric")
    metrics_per_partition: bool = Field(True, description="export per-partition committed-offset series")
    metrics_group_regex: str | None = Field(
        None, description="only groups matching this regex get per-partition series"
    )
    snapshot_cache_bytes: int = Field(
        64 * 2**20,
        ge=0,
        description="memory for rendered GET /groups/{id} snapshots, least recently read dropped first "
        "(approximate bytes; 0 = render on every read)",
    )
    http_tls_cert_file: Path | None = Field(
        None, description="PEM certificate (chain) file: serve HTTPS instead of HTTP (with http_tls_key_file)"
    )
    http_tls_key_file: Path | None = Field(None, description="PEM private key file of http_tls_cert_file")
    http_auth_token_file: Path | None = Field(
        None,
        description="file holding the bearer token every request must carry (Authorization: Bearer "
        "...), e.g. a mounted Kubernetes Secret; read at start, never a flag value",
    )
    http_basic_auth_file: Path | None = Field(
        None,
        description="file holding `user:password` lines for HTTP basic authentication (a mounted "
        "Secret); either this or http_auth_token_file",
    )
    http_open_probes: bool = Field(
        True,
        description="with authentication on, leave /healthz and /ready open (for kubelet probes, "
        "which carry no credentials)",
    )
    http_idle_timeout_s: float = Field(
        15.0, gt=0, description="seconds an HTTP keep-alive connection may stay idle before it is closed"
    )
    http_openmetrics: bool = Field(
        False,
        description="answer /metrics in the OpenMetrics format to scrapers that prefer it (rendered "
        "through prometheus_client: several times slower than the default text format at 10k groups)",
    )

    group_allow_regex: str | None = Field(
        None,
        description="mirror and export only groups whose id matches this regex (Python re.fullmatch); "
        "others are dropped before the stateful step",
    )
    group_deny_regex: str | None = Field(
        None,
        description="never mirror or export groups whose id matches this regex (after the allow regex)",
    )

    # -- lag and consumer health ------------------------------------------------------------------
    lag_enabled: bool = Field(
        True, description="read log offsets of the groups' partitions and export lag (source=kafka only)"
    )
    lag_interval_s: float = Field(
        10.0, gt=0, description="seconds between two rounds of log-offset reads (ListOffsets per broker)"
    )
    lag_isolation: Literal["read_committed", "read_uncommitted"] = Field(
        "read_committed",
        description="lag against the last stable offset (read_committed) or the high watermark",
    )
    lag_lookup_points: int = Field(
        60, ge=2, description="sampled (end offset, time) points kept per partition for lag in seconds"
    )
    lag_slo_seconds: float = Field(
        300.0, gt=0, description="default lag SLO (seconds) exported per group for the lag alert"
    )
    lag_slo_overrides: dict[str, float] = Field(
        default_factory=dict, description="per-group lag SLO in seconds: group id -> seconds"
    )
    burrow_intervals: int = Field(
        10, ge=2, description="commits kept per partition for consumer status (Burrow's intervals)"
    )
    burrow_min_distance_s: float = Field(
        1.0,
        ge=0,
        description="a commit closer than this to the previous one replaces it (Burrow's min-distance)",
    )

    # -- insights (issue 26): docs/insights.md ------------------------------------------------
    commit_behind_s: float = Field(
        300.0,
        gt=0,
        description="a partition whose last commit trails its group's newest commit by more than "
        "this many seconds counts in coordinator_mirror_group_partitions_behind",
    )
    timeline_events_per_group: int = Field(
        50,
        ge=0,
        le=10_000,
        description="change events kept per group for GET /groups/{id}/timeline, newest first "
        "(driver memory: docs/insights.md; 0 switches the timeline off)",
    )
    share_state_enabled: bool = Field(
        True,
        description="also read __share_group_state (a second streaming query, started once the "
        "topic exists) and export share-partition delivery state and lag (source=kafka only)",
    )

    # -- issue 38: offsets as of a moment (docs/insights.md) --------------------------------------
    offset_history_enabled: bool = Field(
        True,
        description="keep every group's committed offsets over time on the driver, for GET "
        "/groups/{id}/offsets?at= and its reset plan (memory: docs/insights.md)",
    )
    offset_history_horizon_s: float = Field(
        86400.0,
        gt=0,
        description="how far back the offset history answers (seconds); older points are dropped "
        "but each partition's newest",
    )
    offset_history_tiers: list[list[float]] = Field(
        default_factory=lambda: [[600.0, 0.0], [7200.0, 300.0], [86400.0, 1800.0]],
        description="the offset history's thinning as age_s:step_s pairs, youngest first (or JSON "
        "[[age_s, step_s], ...]): up to each age one point per step and partition (0: every point, "
        "i.e. one per micro-batch); beyond the last age the last step",
    )
    offset_history_path: Path | None = Field(
        None,
        description="local directory the offset history (and the records-lost counts) persist to; "
        "default <checkpoint_location>/offset-history for a local checkpoint -- a checkpoint on an "
        "object store keeps the history in memory only unless this is set",
    )
    # -- the web UI (issue 37): docs/ui.md ------------------------------------------------------
    http_ui: bool = Field(
        True,
        description="serve the web UI (/ui/groups, /ui/group) on the HTTP port, with the API's TLS and "
        "authentication; off: its pages answer 404 (the JSON API is unchanged)",
    )
    lag_history_minutes: int = Field(
        60,
        ge=0,
        le=1440,
        description="minutes of lag history kept per group and partition for GET /groups/{id}/history "
        "and the UI's charts: every lag round for the newest 10 minutes, one point a minute before "
        "(driver memory: docs/ui.md); 0 keeps only the newest round",
    )
    grafana_url: str | None = Field(
        None,
        description="base URL of the Grafana that holds the mirror's dashboards (e.g. "
        "https://grafana.example.com): the UI links each group to them; unset: no links",
    )

    topic_wait_interval_s: float = Field(
        10.0,
        gt=0,
        description="how often to look again for `__consumer_offsets` (and its partitions) while a "
        "brand-new cluster has none yet",
    )
    query_restart_backoff_s: float = Field(
        5.0,
        gt=0,
        description="first delay before the failed streaming query is restarted from the checkpoint "
        "(doubles per consecutive failure, up to query_restart_backoff_max_s)",
    )
    query_restart_backoff_max_s: float = Field(
        120.0, gt=0, description="longest delay between two restarts of a failing streaming query"
    )
    reconcile_interval_s: float = Field(
        300.0,
        ge=0,
        description="how often to compare the mirrored group list with the coordinators' (Admin "
        "ListGroups); 0 switches the reconciliation off. No round runs while the source check finds "
        "the cluster down (the round comes once it answers)",
    )
    source_check_interval_s: float = Field(
        10.0,
        gt=0,
        description="the longest a cluster that stopped answering goes unreported (/ready 503 'source "
        "unavailable', the source_up metric, a log line): the driver asks it for the topic's metadata "
        "every half interval and waits at most half an interval for the answer",
    )
    # -- Spark ----------------------------------------------------------------------------------
    spark_master: str = Field("local[2]", description="Spark master URL")
    spark_conf: dict[str, str] = Field(default_factory=dict, description="extra Spark settings")
    spark_jars: list[str] | None = Field(
        None, description="connector jars (default: the ones `make jars` resolved for this pyspark)"
    )
    spark_packages: str | None = Field(
        None, description="spark.jars.packages coordinates instead of local jars (needs Ivy + network)"
    )
    # -- many clusters ----------------------------------------------------------------------------
    clusters: list[dict[str, Any]] = Field(
        default_factory=list,
        description="several clusters mirrored by one process (settings file or CM_CLUSTERS as JSON): "
        "a list of maps, each with cluster_name and bootstrap_servers and any per-cluster setting "
        "(CLUSTER_SETTINGS: kafka_options, checkpoint_location -- default <checkpoint_location>/"
        "<cluster_name> --, group filters, lag, outputs, ...); a setting a cluster leaves out is "
        "the top level's. Empty: the one cluster the top-level settings describe",
    )

    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field("INFO", description="log level")
    log_format: Literal["text", "json"] = Field(
        "text",
        description="log lines as text, or one JSON object per line (ts, level, logger, msg) for log "
        "pipelines -- Spark's own log lines too",
    )

    # -- validation -----------------------------------------------------------------------------
    @field_validator("lag_slo_overrides", mode="before")
    @classmethod
    def _slo(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = json.loads(value) if value.strip() else {}
        return value

    @field_validator("kafka_options", "output_kafka_options", mode="before")
    @classmethod
    def _options(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = json.loads(value) if value.strip() else {}
        if isinstance(value, dict):
            # CM_KAFKA_OPTIONS__SECURITY_PROTOCOL arrives as "security_protocol"; Kafka option names
            # are dotted and never contain "_", so the mapping back is unambiguous.
            value = {k.removeprefix("kafka.").replace("_", ".").lower(): str(v) for k, v in value.items()}
            bad = sorted(set(value) & FORBIDDEN_KAFKA_OPTIONS)
            if bad:
                raise ValueError(f"options the mirror sets itself cannot be overridden: {bad}")
        return value

    @field_validator("offset_history_tiers", mode="before")
    @classmethod
    def _tiers_text(cls, value: Any) -> Any:
        """JSON (``[[600, 0], [7200, 300]]``), or ``age:step`` items (a flag given once per tier,
        or ``600:0,7200:300``)."""
        if isinstance(value, str):
            text = value.strip()
            value = json.loads(text) if text.startswith("[") else [x for x in text.split(",") if x.strip()]
        if isinstance(value, list):
            value = [x.split(":", 1) if isinstance(x, str) and ":" in x else x for x in value]
        return value

    @field_validator("offset_history_tiers")
    @classmethod
    def _tiers(cls, value: list[list[float]]) -> list[list[float]]:
        if not value or any(len(x) != 2 for x in value):
            raise ValueError("one or more [age_s, step_s] pairs")
        for (a0, s0), (a1, s1) in itertools.pairwise(value):
            if a1 <= a0 or s1 < s0:
                raise ValueError(f"ages must grow and steps not shrink: {[a0, s0]} then {[a1, s1]}")
        if any(a <= 0 or s < 0 for a, s in value):
            raise ValueError("ages must be > 0 and steps >= 0 (seconds)")
        return value

    @field_validator("metrics_group_regex", "group_allow_regex", "group_deny_regex")
    @classmethod
    def _regex(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"not a regular expression: {exc}") from None
        return value

    @field_validator("grafana_url")
    @classmethod
    def _grafana_url(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        value = value.strip().rstrip("/")
        if not re.fullmatch(r"https?://[^\s/?#]+(/[^\s?#]*)?", value):
            raise ValueError(
                "an http:// or https:// URL without query or fragment, e.g. https://grafana.example.com"
            )
        return value

    @field_validator("clusters", mode="before")
    @classmethod
    def _clusters(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = json.loads(value) if value.strip() else []
        if not isinstance(value, list):
            raise ValueError("a list of maps, one per cluster")
        for i, entry in enumerate(value):
            if not isinstance(entry, dict):
                raise ValueError(f"[{i}]: a map of settings, got {type(entry).__name__}")
            unknown = sorted(set(entry) - set(CLUSTER_SETTINGS))
            if unknown:
                raise ValueError(
                    f"[{i}]: {', '.join(unknown)}: not a per-cluster setting (per cluster: "
                    f"{', '.join(CLUSTER_SETTINGS)}; the others are the process's, at the top level)"
                )
        return value

    @model_validator(mode="after")
    def _source(self) -> Settings:
        if self.source == "kafka" and not self.bootstrap_servers and not self.clusters:
            raise ValueError(
                "bootstrap_servers: required when source=kafka (unless clusters lists the clusters)"
            )
        if self.source == "capture":
            if self.capture_path is None:
                raise ValueError("capture_path: required when source=capture")
            if not self.capture_path.exists():
                raise ValueError(f"capture_path: {self.capture_path} does not exist")
        if (self.events_topic or self.offsets_topic) and not (
            self.output_bootstrap_servers or self.bootstrap_servers
        ):
            raise ValueError(
                "output_bootstrap_servers: events_topic/offsets_topic need it (or bootstrap_servers)"
            )
        if (
            (self.events_topic or self.offsets_topic)
            and self.output_is_other_cluster()
            and self.kafka_options
            and not self.output_kafka_options
            and not self.output_inherit_kafka_options
        ):
            raise ValueError(
                "output_kafka_options: output_bootstrap_servers names another cluster than "
                "bootstrap_servers, so the source's kafka_options (its credentials) are not sent there "
                "by default: set output_kafka_options for that cluster (e.g. security.protocol=PLAINTEXT), "
                "or output_inherit_kafka_options=true to send the same options on purpose"
            )
        if (self.http_tls_cert_file is None) != (self.http_tls_key_file is None):
            raise ValueError("http_tls_key_file: http_tls_cert_file and http_tls_key_file go together")
        if self.http_auth_token_file and self.http_basic_auth_file:
            raise ValueError(
                "http_basic_auth_file: choose one of http_auth_token_file and http_basic_auth_file"
            )
        if self.clusters and self.source != "kafka":
            raise ValueError("clusters: many clusters are read from Kafka (source=kafka), not a capture")
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        if _ONLY_GIVEN.get():  # a cluster's settings: exactly the values handed in
            return (init_settings,)
        return init_settings, _TopLevelEnv(settings_cls, env_settings), _FileSource(settings_cls)

    # -- many clusters ----------------------------------------------------------------------------
    @property
    def multi_cluster(self) -> bool:
        """Whether ``clusters`` lists the clusters (else the top level describes the one cluster)."""
        return bool(self.clusters)

    def cluster_settings(self, environ: Mapping[str, str] | None = None) -> list[Settings]:
        """One `Settings` per mirrored cluster: the top level itself when ``clusters`` is empty
        (today's single cluster, its checkpoint where it always was); else the top level with each
        entry's settings in place of its own (a map such as ``kafka_options`` replaced whole, never
        merged: another cluster's credentials must not leak into this one's), then the entries of
        ``CM_CLUSTERS__<NAME>__<SETTING>[__<KEY>]`` (`cluster_env_prefix`: its secrets, added to
        its maps), its checkpoint ``<checkpoint_location>/<cluster_name>`` unless it names one.
        `SettingsError` names the entry and the setting."""
        if not self.clusters:
            return [self]
        env = os.environ if environ is None else environ
        base = self.model_dump(exclude={"clusters"})
        out: list[Settings] = []
        problems: list[str] = []
        for i, entry in enumerate(self.clusters):
            name = entry.get("cluster_name")
            where = f"clusters[{i}]" + (f" ({name})" if name else "")
            if not name:
                problems.append(f"{where}.cluster_name: required for each cluster")
                continue
            values = {**base, "bootstrap_servers": None, **entry}
            for setting, given in _cluster_env(str(name), env).items():
                held = values.get(setting)
                # a map's entries (a secret) go beside the map's other options
                values[setting] = (
                    {**held, **given} if isinstance(given, dict) and isinstance(held, dict) else given
                )
            if "checkpoint_location" not in entry:
                values["checkpoint_location"] = f"{base['checkpoint_location'].rstrip('/')}/{name}"
            token = _ONLY_GIVEN.set(True)
            try:
                out.append(Settings(**values))
            except ValidationError as exc:
                problems += [f"{where}.{_problem(err)}" for err in exc.errors()]
            finally:
                _ONLY_GIVEN.reset(token)
        problems += _cluster_clashes(out)
        if problems:
            raise SettingsError("invalid settings:\n  " + "\n  ".join(problems))
        return out

    def process_java_options(self, clusters: list[Settings]) -> list[str]:
        """JVM options of the process's shared JVMs (the client JVM, Spark's): the top level's
        ``kafka_client_java_options`` and every cluster's OAUTHBEARER URLs allowed."""
        out = list(self.kafka_client_java_options)
        urls = oauth_urls(*(m for c in clusters for m in (c.kafka_options, c.output_kafka_options)))
        given = " ".join([*out, *(v for k, v in self.spark_conf.items() if k.endswith("extraJavaOptions"))])
        if urls and f"-D{OAUTH_ALLOWED_URLS}=" not in given:
            out.append(f"-D{OAUTH_ALLOWED_URLS}={','.join(urls)}")
        return out

    # -- derived --------------------------------------------------------------------------------
    @property
    def retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000

    @property
    def confirm_grace_ms(self) -> int:
        """The broker sweeps every check interval; allow that plus a minute of appends and skew."""
        return self.offsets_retention_check_interval_ms + 60_000

    def offset_config(self) -> OffsetConfig:
        """The state layer's configuration (built once per application, passed down)."""
        return OffsetConfig(
            retention_ms=self.retention_ms,
            semantics=self.expiry_semantics,
            confirm_grace_ms=self.confirm_grace_ms,
        )

    @property
    def group_filter(self) -> tuple[str | None, str | None]:
        """(allow, deny) regexes of the group filter, for the prepare step."""
        return self.group_allow_regex, self.group_deny_regex

    def offset_history_dir(self) -> Path | None:
        """Where the offset history persists: ``offset_history_path``, else next to a local
        checkpoint (a path, or ``file:``), else nowhere (None: kept in memory only)."""
        if self.offset_history_path is not None:
            return self.offset_history_path
        loc = self.checkpoint_location
        if "://" in loc and not loc.startswith("file:"):
            return None
        return Path(loc.removeprefix("file://").removeprefix("file:")) / "offset-history"

    def lag_slo(self, group_id: str) -> float:
        return self.lag_slo_overrides.get(group_id, self.lag_slo_seconds)

    @property
    def trigger_interval_ms(self) -> int:
        return int(self.trigger_interval_s * 1000)

    def output_bootstrap(self) -> str | None:
        return self.output_bootstrap_servers or self.bootstrap_servers

    def output_is_other_cluster(self) -> bool:
        """Does ``output_bootstrap_servers`` name other brokers than ``bootstrap_servers``?"""
        if not self.output_bootstrap_servers:
            return False
        return _hosts(self.output_bootstrap_servers) != _hosts(self.bootstrap_servers or "")

    def output_options(self) -> dict[str, str]:
        """Producer options for the output topics: the source's only for the same cluster or when
        ``output_inherit_kafka_options`` says so (validation rejects the silent default)."""
        if self.output_kafka_options:
            return dict(self.output_kafka_options)
        if self.output_is_other_cluster() and not self.output_inherit_kafka_options:
            return {}
        return dict(self.kafka_options)

    def check_client_files(self) -> None:
        """The key and trust store files the Kafka client options name exist and are readable:
        a `SettingsError` naming the setting and the option otherwise, before anything starts.
        (A start-up check, not validation: the chart validates settings where the files are not.)
        A location given by a config provider (``${file:...}``) is the provider's to resolve."""
        for family in ("kafka_options", "output_kafka_options"):
            for key in STORE_LOCATION_OPTIONS:
                value = getattr(self, family).get(key)
                if not value or "${" in value:
                    continue
                path = Path(value)
                if not path.is_file():
                    raise SettingsError(f"{family}: {key}: {value}: no such file")
                if not os.access(path, os.R_OK):
                    raise SettingsError(f"{family}: {key}: {value}: not readable by this user")
        for jar in self.kafka_plugin_jars:
            if not Path(jar).is_file():
                raise SettingsError(f"kafka_plugin_jars: {jar}: no such file")
            if not os.access(jar, os.R_OK):
                raise SettingsError(f"kafka_plugin_jars: {jar}: not readable by this user")

    def kafka_java_options(self) -> list[str]:
        """JVM options for every JVM that runs the mirror's Kafka clients (the driver's client JVM,
        capture's, Spark's driver and executors): ``kafka_client_java_options``, and the
        OAUTHBEARER URLs of the client options allowed (`OAUTH_ALLOWED_URLS`) unless given there or
        in ``spark_conf``'s extraJavaOptions."""
        out = list(self.kafka_client_java_options)
        urls = oauth_urls(self.kafka_options, self.output_kafka_options)
        given = " ".join([*out, *(v for k, v in self.spark_conf.items() if k.endswith("extraJavaOptions"))])
        if urls and f"-D{OAUTH_ALLOWED_URLS}=" not in given:
            out.append(f"-D{OAUTH_ALLOWED_URLS}={','.join(urls)}")
        return out

    def redacted(self) -> dict[str, Any]:
        """The settings as logged or echoed: every secret-looking entry of every map hidden."""
        data: dict[str, Any] = redact(self.model_dump(mode="json"))
        return data

    def secret_values(self) -> list[str]:
        """Every value the redaction hides, and the passwords inside JAAS configs: error texts are
        scrubbed of them before they are printed."""
        out: list[str] = []
        for family in SECRET_FAMILIES:
            for key, value in getattr(self, family).items():
                if is_secret(key):
                    out.append(value)
                    out += re.findall(r'(?:password|token|secret)\w*\s*=\s*"([^"]*)"', value, re.I)
        return out


#: Kafka client options that name a key or trust store file (`Settings.check_client_files`)
STORE_LOCATION_OPTIONS: Final = ("ssl.truststore.location", "ssl.keystore.location")

#: The JVM system property that lets Kafka's clients fetch OAUTHBEARER tokens and keys from a URL:
#: since Kafka 4.0 (and 3.9.1, CVE-2025-27817) a client refuses a token endpoint not listed in it
#: ("The URL cannot be accessed due to restrictions").  The URLs of the mirror's own options are
#: its operator's, so the mirror lists exactly those in the JVMs it runs clients in (`kafka_java_options`).
OAUTH_ALLOWED_URLS: Final = "org.apache.kafka.sasl.oauthbearer.allowed.urls"
OAUTH_URL_OPTIONS: Final = ("sasl.oauthbearer.token.endpoint.url", "sasl.oauthbearer.jwks.endpoint.url")


def oauth_urls(*option_maps: dict[str, str]) -> list[str]:
    """The token and JWKS endpoint URLs named in these Kafka client options (sorted, unique)."""
    return sorted({m[k] for m in option_maps for k in OAUTH_URL_OPTIONS if m.get(k)})


#: the maps whose entries may hold secrets (Kafka client options, Spark and Hadoop settings)
SECRET_FAMILIES: tuple[str, ...] = ("kafka_options", "output_kafka_options", "spark_conf")
#: a key holding one of these words (any case) is a secret: passwords, secrets, tokens,
#: credentials, JAAS configs (sasl.jaas.config carries the password), private material
SECRET_WORDS: tuple[str, ...] = (
    "password",
    "passwd",
    "passphrase",
    "secret",
    "token",
    "jaas",
    "credential",
    "private",
)
#: keys that name a place or a kind -- what a person debugging a setup needs to see -- are never
#: secrets themselves, whatever words they hold (ssl.keystore.location, ssl.truststore.type,
#: sasl.oauthbearer.token.endpoint.url, a service account's keyfile path)
NOT_SECRET_SUFFIXES: tuple[str, ...] = (
    ".location",
    ".type",
    ".file",
    "keyfile",
    ".path",
    ".algorithm",
    ".url",
)

MASK = "***"


def is_secret(name: str) -> bool:
    """Whether the value of option ``name`` is secret: a secret word in the name, or a name with
    ``key`` as one of its words (ssl.keystore.key -- a PEM private key --, fs.s3a.access.key,
    fs.azure.account.key.<account>..., AWS_SECRET_ACCESS_KEY); not a place or a kind
    (`NOT_SECRET_SUFFIXES`), so ``ssl.keystore.location`` and ``ssl.keystore.type`` stay readable."""
    lowered = name.lower()
    if lowered.startswith("http_") and lowered.endswith("_file"):
        return False  # our own settings that name a secret's file, not the secret
    if lowered.endswith(NOT_SECRET_SUFFIXES):
        return False
    if any(word in lowered for word in SECRET_WORDS):
        return True
    return "key" in re.split(r"[._\-]", lowered)


def redact(data: Any) -> Any:
    """``data`` (settings as JSON-able values) with the value of every secret-named key masked, in
    nested maps too -- whatever family or source (flag, environment, file) it came from."""
    if isinstance(data, dict):
        return {k: (MASK if is_secret(str(k)) and v not in (None, {}, []) and not isinstance(v, dict)
                    else redact(v)) for k, v in data.items()}  # fmt: skip
    if isinstance(data, list):
        return [redact(v) for v in data]
    return data


def _hosts(servers: str) -> frozenset[str]:
    return frozenset(h.strip().lower() for h in servers.split(",") if h.strip())


#: the settings a cluster of ``clusters`` may set for itself; every other setting is the process's
#: (the HTTP endpoint, Spark, logging, the JVMs' options and plugin jars, the source kind)
CLUSTER_SETTINGS: Final = (
    "cluster_name", "bootstrap_servers", "kafka_options", "checkpoint_location", "topic",
    "max_offsets_per_trigger", "backfill", "preview", "trigger_interval_s", "source_tasks",
    "shuffle_partitions",
    "offsets_retention_minutes", "offsets_retention_check_interval_ms", "default_server_assignor",
    "expiry_semantics", "events_topic", "events_path", "offsets_topic", "output_bootstrap_servers",
    "output_kafka_options", "output_inherit_kafka_options", "metrics_per_partition",
    "metrics_group_regex", "snapshot_cache_bytes", "group_allow_regex", "group_deny_regex",
    "lag_enabled", "lag_interval_s", "lag_isolation", "lag_lookup_points", "lag_slo_seconds",
    "lag_slo_overrides", "burrow_intervals", "burrow_min_distance_s", "commit_behind_s",
    "timeline_events_per_group", "share_state_enabled", "topic_wait_interval_s",
    "query_restart_backoff_s", "query_restart_backoff_max_s", "reconcile_interval_s",
    "source_check_interval_s",
)  # fmt: skip

#: a cluster's settings are built from exactly what is handed in (no environment, no file)
_ONLY_GIVEN: ContextVar[bool] = ContextVar("coordinator_mirror_only_given", default=False)


def cluster_env_prefix(name: str) -> str:
    """``CM_CLUSTERS__<NAME>__``: the environment variables of cluster ``name``'s settings (its
    secrets above all: ``CM_CLUSTERS__PROD_EU1__KAFKA_OPTIONS__SASL_JAAS_CONFIG``); the name upper
    case, every character but letters and digits an underscore."""
    return f"{ENV_PREFIX}CLUSTERS__{re.sub(r'[^A-Za-z0-9]', '_', name).upper()}__"


def _cluster_env(name: str, environ: Mapping[str, str]) -> dict[str, Any]:
    """Cluster ``name``'s settings from the environment: ``<prefix>SETTING`` (JSON for maps), and
    ``<prefix>KAFKA_OPTIONS__<OPTION>`` for one entry of a map (option names as for the top level:
    underscores for dots)."""
    prefix = cluster_env_prefix(name)
    out: dict[str, Any] = {}
    for key, value in environ.items():
        if not key.startswith(prefix):
            continue
        setting, _, entry = key[len(prefix) :].lower().partition("__")
        if setting not in CLUSTER_SETTINGS:
            continue
        if entry:
            out.setdefault(setting, {})
            if isinstance(out[setting], dict):
                out[setting][entry] = value
        else:
            out[setting] = value
    return out


def _problem(err: Any) -> str:
    msg = str(err["msg"]).removeprefix("Value error, ")
    name = ".".join(str(p) for p in err["loc"])
    if not name and ":" in msg:  # a model validator's "setting: why"
        return msg
    return f"{name}: {msg}" if name else msg


def _cluster_clashes(clusters: list[Settings]) -> list[str]:
    """Two clusters with one name, or one checkpoint (or one inside another's)."""
    out = []
    seen: dict[str, int] = {}
    for i, c in enumerate(clusters):
        if c.cluster_name in seen:
            out.append(
                f"clusters[{i}].cluster_name: {c.cluster_name!r} names clusters[{seen[c.cluster_name]}] too "
                "(each cluster's name labels its series and routes its API: names must differ)"
            )
        seen.setdefault(c.cluster_name, i)
    roots = [(i, c.checkpoint_location.rstrip("/") + "/") for i, c in enumerate(clusters)]
    for i, a in roots:
        for j, b in roots:
            if i < j and (a.startswith(b) or b.startswith(a)):
                out.append(
                    f"clusters[{j}].checkpoint_location: {b.rstrip('/')} is clusters[{i}]'s "
                    f"({a.rstrip('/')}) or inside it: each cluster needs a checkpoint of its own"
                )
    return out


#: the file ``load_settings(config_file)`` reads for the duration of that call
_CONFIG_FILE: ContextVar[str | None] = ContextVar("coordinator_mirror_config_file", default=None)


class _TopLevelEnv(PydanticBaseSettingsSource):
    """The ``CM_*`` environment of the top level: ``CM_CLUSTERS`` (JSON) is the clusters' list, but
    ``CM_CLUSTERS__<NAME>__...`` -- which the nested delimiter would read as a map under
    ``clusters`` -- is a cluster's own (`Settings.cluster_settings`)."""

    def __init__(self, settings_cls: type[BaseSettings], inner: PydanticBaseSettingsSource) -> None:
        super().__init__(settings_cls)
        self.inner = inner

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        data = self.inner()
        if isinstance(data.get("clusters"), dict):
            data = {k: v for k, v in data.items() if k != "clusters"}
        return data


class _FileSource(PydanticBaseSettingsSource):
    """The optional settings file: ``--config`` (``load_settings(config_file)``), else the file
    named by ``CM_CONFIG_FILE``."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        path = _CONFIG_FILE.get() or os.environ.get(CONFIG_ENV)
        if not path:
            return {}
        text = Path(path).read_text()
        if path.endswith((".yaml", ".yml")):
            import yaml

            data = yaml.safe_load(text) or {}
        else:
            data = json.loads(text)
        if not isinstance(data, dict):
            raise SettingsError(f"{path}: expected a mapping of setting names to values")
        return data


def load_settings(config_file: str | None = None, **overrides: Any) -> Settings:
    """Build the settings; raise :class:`SettingsError` naming every invalid setting."""
    if config_file and not Path(config_file).is_file():
        raise SettingsError(f"config: file {config_file} not found")
    # scoped to this call: a process-wide CM_CONFIG_FILE would leak the file into every later
    # load_settings() (seen in the test suite: one test's SSL options reached another's mirror)
    token = _CONFIG_FILE.set(config_file or None)
    try:
        return Settings(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as exc:
        problems = [_problem(err) for err in exc.errors()]
        raise SettingsError("invalid settings:\n  " + "\n  ".join(problems)) from None
    finally:
        _CONFIG_FILE.reset(token)


def settings_table_markdown() -> str:
    """The settings table of docs/operating.md, generated from the model (docs/generate.py; a test
    keeps the page in sync)."""
    lines = [
        "| setting | flag | environment | default | meaning |",
        "|---|---|---|---|---|",
    ]
    for name, field in Settings.model_fields.items():
        default = field.get_default(call_default_factory=True)
        shown = "(required)" if name == "bootstrap_servers" else json.dumps(default, default=str)
        description = (field.description or "").replace("|", "\\|")
        flag = "(settings file)" if name == "clusters" else f"`--{name.replace('_', '-')}`"
        lines.append(f"| `{name}` | {flag} | `CM_{name.upper()}` | `{shown}` | {description} |")
    return "\n".join(lines)
