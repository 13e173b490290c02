# syntax=docker/dockerfile:1
#
# coordinator-mirror: PySpark on Java 17 / Python 3.11 with everything baked in -- the project,
# Spark's Kafka connector and, as a build option, the S3A connector -- so that pods never resolve
# anything from Maven or PyPI at run time.
#
#   docker build -t REGISTRY/coordinator-mirror:0.1.0 .                           # checkpoint on a volume
#   docker build --build-arg WITH_S3A=true -t REGISTRY/coordinator-mirror:0.1.0 .  # and s3a:// checkpoints
#   docker run --rm REGISTRY/coordinator-mirror:0.1.0 run --bootstrap-servers HOST:9092 --http-host 0.0.0.0
#
# One image serves both chart modes: `run` (the default command) for the Deployment, and Spark's
# `driver` / `executor` pod roles for a SparkApplication (docker/entrypoint.sh).
#
# SPARK_VERSION must equal the pyspark the project is tested with (Makefile SPARK_VERSION): the
# connector uses Spark internals and the application refuses a mismatched one.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm
ARG MAVEN_IMAGE=maven:3.9-eclipse-temurin-17

# -- JVM artifacts from Maven Central: the same resolution as `make jars` ----------------------
FROM ${MAVEN_IMAGE} AS jars
ARG SPARK_VERSION=4.2.0
# The S3A connector (hadoop-aws + the AWS SDK v2 bundle, ~690 MB) is a build option: build with
# --build-arg WITH_S3A=true for an s3a:// checkpoint (what sparkApplication mode needs); without it
# checkpoints stay on a volume (the chart's deployment mode).
ARG WITH_S3A=false
WORKDIR /build
COPY jvm/spark/pom.xml jvm/spark/pom.xml
COPY docker/cloud-jars/pom.xml docker/cloud-jars/pom.xml
# Spark's Kafka connector and its runtime set (what spark-notes §5 lists: the rest is in pyspark),
# laid out as streaming/jars.py expects: <root>/spark-kafka-<version>/*.jar + .complete.
RUN mvn -q -B -f jvm/spark/pom.xml dependency:copy-dependencies \
        -Dspark.version=${SPARK_VERSION} -DincludeScope=runtime \
        -DincludeArtifactIds=spark-sql-kafka-0-10_2.13,spark-token-provider-kafka-0-10_2.13,kafka-clients,commons-pool2 \
        -DoutputDirectory=/out/jars/spark-kafka-${SPARK_VERSION} \
    && touch /out/jars/spark-kafka-${SPARK_VERSION}/.complete \
    && mkdir -p /out/cloud-jars \
    && if [ "${WITH_S3A}" = true ]; then \
        mvn -q -B -f docker/cloud-jars/pom.xml dependency:copy-dependencies \
            -DincludeScope=runtime -DoutputDirectory=/out/cloud-jars; \
    fi

# Hadoop's local file system without a process per call (jvm/localfs; `make jars` builds the same),
# compiled against the hadoop-client-api that pyspark ships (HADOOP_VERSION: docker/cloud-jars/pom.xml).
ARG HADOOP_VERSION=3.5.0
COPY jvm/localfs/src jvm/localfs/src
RUN mvn -q -B org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy \
        -Dartifact=org.apache.hadoop:hadoop-client-api:${HADOOP_VERSION} -DoutputDirectory=/build/hadoop-api \
    && mkdir -p /build/localfs /out/jars/localfs-${SPARK_VERSION} \
    && javac --release 17 -nowarn -d /build/localfs -cp '/build/hadoop-api/*' \
        jvm/localfs/src/io/github/coordinatormirror/fs/*.java \
    && jar cf /out/jars/localfs-${SPARK_VERSION}/coordinator-mirror-localfs.jar -C /build/localfs . \
    && touch /out/jars/localfs-${SPARK_VERSION}/.complete

# The driver's Kafka clients (streaming/cluster/jvm.py; `make jars` builds the same): kafka-clients
# 4.x and jose4j beside the connector's 3.9, and our bridge to them (jvm/bridge) compiled against it.
ARG KAFKA_CLIENTS_VERSION=4.3.1
ARG JOSE4J_VERSION=0.9.6
COPY jvm/bridge/src jvm/bridge/src
RUN mkdir -p /out/jars/clients-${KAFKA_CLIENTS_VERSION} /build/bridge \
    && for a in org.apache.kafka:kafka-clients:${KAFKA_CLIENTS_VERSION} org.bitbucket.b_c:jose4j:${JOSE4J_VERSION}; do \
        mvn -q -B org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy \
            -Dartifact="$a" -DoutputDirectory=/out/jars/clients-${KAFKA_CLIENTS_VERSION} || exit 1; \
    done \
    && javac --release 17 -nowarn -d /build/bridge \
        -cp /out/jars/clients-${KAFKA_CLIENTS_VERSION}/kafka-clients-${KAFKA_CLIENTS_VERSION}.jar \
        jvm/bridge/src/io/github/coordinatormirror/kafka/*.java \
    && jar cf /out/jars/clients-${KAFKA_CLIENTS_VERSION}/coordinator-mirror-kafka.jar -C /build/bridge . \
    && touch /out/jars/clients-${KAFKA_CLIENTS_VERSION}/.complete

# -- The Python environment: the project and pyspark in a virtualenv ----------------------------
FROM ${PYTHON_IMAGE} AS venv
ARG SPARK_VERSION=4.2.0
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/coordinator-mirror/venv
WORKDIR /src
COPY pyproject.toml README.md ./
COPY decoders decoders
COPY state state
COPY streaming streaming
RUN /opt/coordinator-mirror/venv/bin/pip install . "pyspark==${SPARK_VERSION}"

# -- Runtime ------------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE}
ARG SPARK_VERSION=4.2.0
# Java 17 for Spark; tini as PID 1 (signal forwarding, zombie reaping); procps for Spark's scripts.
# Debian's security updates replace package versions, so they are not pinned (hadolint DL3008).
# hadolint ignore=DL3008
RUN mkdir -p /usr/share/man/man1 \
    && apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless tini procps \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /opt/java \
    && ln -s "$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")" /opt/java/openjdk
RUN groupadd --system --gid 10001 mirror \
    && useradd --system --uid 10001 --gid mirror --home-dir /home/mirror --create-home \
        --shell /usr/sbin/nologin mirror
ENV JAVA_HOME=/opt/java/openjdk \
    VIRTUAL_ENV=/opt/coordinator-mirror/venv \
    PATH=/opt/coordinator-mirror/venv/bin:${PATH} \
    SPARK_HOME=/opt/coordinator-mirror/venv/lib/python3.11/site-packages/pyspark \
    PYSPARK_PYTHON=/opt/coordinator-mirror/venv/bin/python \
    PYSPARK_DRIVER_PYTHON=/opt/coordinator-mirror/venv/bin/python \
    COORDINATOR_MIRROR_JARS=/opt/coordinator-mirror/jars \
    HOME=/home/mirror \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
COPY --from=venv /opt/coordinator-mirror/venv /opt/coordinator-mirror/venv
COPY --from=jars /out/jars /opt/coordinator-mirror/jars
# S3A on Spark's own classpath (driver and executors alike), where Hadoop's FileSystem finds it
# (an empty directory without WITH_S3A=true).
COPY --from=jars /out/cloud-jars/ ${SPARK_HOME}/jars/
COPY docker/entrypoint.sh docker/stop-driver /opt/coordinator-mirror/bin/
COPY docker/spark_main.py /opt/coordinator-mirror/main.py
# The Spark driver JVM's class-data-sharing archive (streaming/pipeline/class_archive.py), made with
# the image's own JVM and class path; the mirror starts without it if this step could not make it.
RUN python -m streaming.app.class_archive_cmd \
    || echo "warning: no class archive made; the mirror starts without it" >&2
WORKDIR /home/mirror
USER 10001:10001
EXPOSE 8080
ENTRYPOINT ["/opt/coordinator-mirror/bin/entrypoint.sh"]
CMD ["run"]
