#!/bin/bash
# The image's entrypoint.
#
#   run | demo | capture | decode | -... | (nothing)
#       `coordinator-mirror "$@"` under tini (the default command is `run`). tini forwards SIGTERM
#       to the mirror only -- not to its Spark JVM -- so the mirror stops its query between
#       micro-batches and then stops Spark itself.
#   driver | executor
#       the roles Spark on Kubernetes starts its pods with (SparkApplication mode): Spark sets
#       only the container's arguments and relies on the image's entrypoint to run them. They
#       follow the contract of Spark's own kubernetes/dockerfiles/spark/entrypoint.sh (Spark 4.0):
#       the driver runs spark-submit in client mode bound to the pod's address, the executor runs
#       KubernetesExecutorBackend with the SPARK_* variables the driver gave its pod.
#   anything else
#       run as given (`docker run IMAGE bash`).
set -eo pipefail

TINI=${TINI:-/usr/bin/tini}
[ "$#" -gt 0 ] || set -- run

if [ -z "${JAVA_HOME:-}" ]; then
    JAVA_HOME=$(java -XshowSettings:properties -version 2>&1 >/dev/null | awk '/java.home/ {print $3}')
fi

spark_classpath() {
    local cp="${SPARK_CLASSPATH:+$SPARK_CLASSPATH:}${SPARK_HOME}/jars/*"
    [ -n "${SPARK_EXTRA_CLASSPATH:-}" ] && cp="$cp:$SPARK_EXTRA_CLASSPATH"
    [ -n "${HADOOP_CONF_DIR:-}" ] && cp="$HADOOP_CONF_DIR:$cp"
    if [ -n "${SPARK_CONF_DIR:-}" ]; then
        cp="$SPARK_CONF_DIR:$cp"
    else
        cp="$SPARK_HOME/conf:$cp"
    fi
    # SPARK-43540: the working directory is on the executor's classpath.
    printf '%s:%s' "$cp" "$PWD"
}

case "$1" in
    driver)
        shift
        exec "$TINI" -s -- "$SPARK_HOME/bin/spark-submit" \
            --conf "spark.driver.bindAddress=$SPARK_DRIVER_BIND_ADDRESS" \
            --conf "spark.executorEnv.SPARK_DRIVER_POD_IP=$SPARK_DRIVER_BIND_ADDRESS" \
            --deploy-mode client \
            "$@"
        ;;
    executor)
        shift
        java_opts=()
        for v in "${!SPARK_JAVA_OPT_@}"; do
            java_opts+=("${!v}")
        done
        exec "$TINI" -s -- "$JAVA_HOME/bin/java" \
            "${java_opts[@]}" \
            -Xms"$SPARK_EXECUTOR_MEMORY" -Xmx"$SPARK_EXECUTOR_MEMORY" \
            -cp "$(spark_classpath):${SPARK_DIST_CLASSPATH:-}" \
            org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
            --driver-url "$SPARK_DRIVER_URL" \
            --executor-id "$SPARK_EXECUTOR_ID" \
            --cores "$SPARK_EXECUTOR_CORES" \
            --app-id "$SPARK_APPLICATION_ID" \
            --hostname "$SPARK_EXECUTOR_POD_IP" \
            --resourceProfileId "$SPARK_RESOURCE_PROFILE_ID" \
            --podName "$SPARK_EXECUTOR_POD_NAME"
        ;;
    run | demo | capture | decode | -*)
        exec "$TINI" -s -- coordinator-mirror "$@"
        ;;
    *)
        exec "$@"
        ;;
esac
