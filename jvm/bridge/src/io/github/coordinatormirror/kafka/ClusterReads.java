package io.github.coordinatormirror.kafka;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DescribeClusterOptions;
import org.apache.kafka.clients.admin.DescribeConfigsOptions;
import org.apache.kafka.clients.admin.DescribeTopicsOptions;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.ListGroupsResult;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.ListTopicsOptions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.InvalidTopicException;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.internals.Topic;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.protocol.Errors;

/**
 * The driver's reads of the cluster through Kafka's own Admin client, configured with the mirror's
 * {@code kafka_options} exactly as given (the same dialect as Spark's Kafka source: key stores of
 * every type, every SASL mechanism, config providers). Runs in a JVM of its own, started by the
 * mirror (streaming/cluster/jvm.py): kafka-clients 4.x there, Spark's 3.9 in Spark's JVM. Answers
 * cross to Python through py4j as {@link Frames} or JSON.
 */
public final class ClusterReads {
  private final Admin admin;
  private final int timeoutMs;

  public ClusterReads(Map<String, String> props, long timeoutMs) {
    this.timeoutMs = (int) timeoutMs;
    Map<String, Object> conf = new HashMap<>();
    conf.put(AdminClientConfig.CLIENT_ID_CONFIG, "coordinator-mirror-driver");
    conf.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, (int) Math.min(timeoutMs, 30_000));
    conf.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, (int) timeoutMs);
    conf.putAll(only(props, AdminClientConfig.configNames()));
    admin = Admin.create(conf);
  }

  /**
   * The options an Admin client knows, and config providers' own ({@code config.providers.*}):
   * kafka_options also tune Spark's consumer (max.poll.records, ...), which the Admin client would
   * list as "supplied but not used" at every start.
   */
  static Map<String, Object> only(Map<String, String> props, Set<String> known) {
    Map<String, Object> out = new HashMap<>();
    props.forEach((k, v) -> {
      if (known.contains(k) || k.startsWith("config.providers")) {
        out.put(k, v);
      }
    });
    return out;
  }

  /**
   * The future's value, or its failure's cause; never waits forever: the Admin client's own
   * timeout ends every call, and this one (a little later) guards against a future it never
   * completes.
   */
  <T> T get(KafkaFuture<T> future) throws Exception {
    return get(future, timeoutMs);
  }

  /** {@link #get(KafkaFuture)} for a call made with a timeout of its own, {@code callTimeoutMs}. */
  <T> T get(KafkaFuture<T> future, int callTimeoutMs) throws Exception {
    long waitMs = callTimeoutMs + Math.min(5_000L, callTimeoutMs);
    try {
      return future.get(waitMs, TimeUnit.MILLISECONDS);
    } catch (ExecutionException e) {
      Throwable cause = e.getCause();
      if (cause instanceof Exception) {
        throw (Exception) cause;
      }
      throw e;
    } catch (java.util.concurrent.TimeoutException e) {
      throw new org.apache.kafka.common.errors.TimeoutException("no answer within " + waitMs + " ms");
    }
  }

  /** The version of the kafka-clients this object runs on. */
  public String clientVersion() {
    return org.apache.kafka.common.utils.AppInfoParser.getVersion();
  }

  /** DescribeCluster's cluster id. */
  public String clusterId() throws Exception {
    return get(admin.describeCluster(new DescribeClusterOptions().timeoutMs(timeoutMs)).clusterId());
  }

  /**
   * The operations the principal may perform on the cluster resource (comma-separated ACL
   * operation names), or null when the cluster runs no authorizer (everything is allowed).
   */
  public String clusterOperations() throws Exception {
    java.util.Set<org.apache.kafka.common.acl.AclOperation> ops = get(admin.describeCluster(
        new DescribeClusterOptions().includeAuthorizedOperations(true).timeoutMs(timeoutMs))
        .authorizedOperations());
    if (ops == null) {
      return null;
    }
    StringBuilder out = new StringBuilder();
    for (org.apache.kafka.common.acl.AclOperation op : ops) {
      out.append(out.length() == 0 ? "" : ",").append(op.name());
    }
    return out.toString();
  }

  /**
   * {@code "<topic id> <partitions> <partitions without a leader>"}, or "" when the topic does not
   * exist; a topic the principal may not describe raises TopicAuthorizationException.
   */
  public String describeTopic(String topic) throws Exception {
    return describeTopic(topic, timeoutMs);
  }

  /**
   * {@link #describeTopic(String)} answered within {@code callTimeoutMs} or failed with a
   * TimeoutException: the mirror's source check asks this way, so that a cluster that does not
   * answer is reported within its interval whatever the client's {@code default.api.timeout.ms}.
   */
  public String describeTopic(String topic, int callTimeoutMs) throws Exception {
    TopicDescription d;
    try {
      d = get(admin.describeTopics(List.of(topic), new DescribeTopicsOptions().timeoutMs(callTimeoutMs))
          .topicNameValues().get(topic), callTimeoutMs);
    } catch (UnknownTopicOrPartitionException e) {
      return "";
    }
    int leaderless = 0;
    for (TopicPartitionInfo p : d.partitions()) {
      if (p.leader() == null || p.leader().isEmpty()) {
        leaderless++;
      }
    }
    return d.topicId() + " " + d.partitions().size() + " " + leaderless;
  }

  /** One configuration value of a topic (null when the broker does not name it). */
  public String topicConfig(String topic, String name) throws Exception {
    ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
    Config config = get(admin.describeConfigs(List.of(res), new DescribeConfigsOptions().timeoutMs(timeoutMs))
        .values().get(res));
    ConfigEntry entry = config.get(name);
    return entry == null ? null : entry.value();
  }

  /**
   * ListGroups of every coordinator (4.x's {@code listGroups}: classic, consumer, share and streams
   * groups), as JSON -- {@code {"errors": [text, ...], "groups": [[id, type, state], ...]}} -- which
   * Python parses at C speed (100k groups: the per-field frames took 0.45 s to read in Python).
   * Errors: a broker that did not answer, one still loading a coordinator partition.
   */
  public String listGroups() throws Exception {
    ListGroupsResult result = admin.listGroups(new ListGroupsOptions().timeoutMs(timeoutMs));
    Collection<Throwable> errors = get(result.errors());
    Collection<GroupListing> groups = get(result.valid());
    StringBuilder out = new StringBuilder(64 + 48 * groups.size()).append("{\"errors\":[");
    String sep = "";
    for (Throwable t : errors) {
      out.append(sep);
      Json.string(out, t.getClass().getSimpleName() + ": " + t.getMessage());
      sep = ",";
    }
    out.append("],\"groups\":[");
    sep = "";
    for (GroupListing g : groups) {
      out.append(sep).append('[');
      Json.string(out, g.groupId());
      out.append(",\"").append(g.type().map(t -> t.name().toLowerCase()).orElse("unknown"));
      out.append("\",\"").append(g.groupState().map(st -> st.name().toLowerCase()).orElse("unknown"));
      out.append("\"]");
      sep = ",";
    }
    return out.append("]}").toString();
  }

  /** Every topic's name, internal ones included: i32 count, names. */
  public byte[] topicNames() throws Exception {
    Set<String> names = get(admin.listTopics(new ListTopicsOptions().listInternal(true).timeoutMs(timeoutMs))
        .names());
    Frames f = new Frames().i32(names.size());
    names.forEach(f::str);
    return f.done();
  }

  /**
   * Topic ids ({@link Uuid#toString}: Kafka's URL-safe base64, the form the coordinator's records
   * carry) of the topics named in {@code request} (i32 count, names): per name, in order, the name,
   * its id (null when there is none to give) and an error code (Kafka's; 0 for none): a topic the
   * principal may not Describe is TOPIC_AUTHORIZATION_FAILED, not gone -- Metadata leaves both out.
   */
  public byte[] topicIds(byte[] request) throws Exception {
    Frames.Reader in = new Frames.Reader(request);
    int n = in.i32();
    List<String> names = new ArrayList<>(n);
    List<String> valid = new ArrayList<>(n);
    for (int i = 0; i < n; i++) {
      String name = in.str();
      names.add(name);
      try {
        Topic.validate(name); // no topic can have another name: nothing to ask the cluster
        valid.add(name);
      } catch (InvalidTopicException e) {
        // answered null below
      }
    }
    Map<String, KafkaFuture<TopicDescription>> futures = valid.isEmpty()
        ? Map.of()
        : admin.describeTopics(valid, new DescribeTopicsOptions().timeoutMs(timeoutMs)).topicNameValues();
    Frames f = new Frames().i32(n);
    for (String name : names) {
      String id = null;
      short error = 0;
      KafkaFuture<TopicDescription> future = futures.get(name);
      if (future == null) {
        error = Errors.INVALID_TOPIC_EXCEPTION.code();
      } else {
        try {
          Uuid uuid = get(future).topicId();
          id = uuid == null ? null : uuid.toString();
        } catch (Exception e) {
          error = Errors.forException(e).code(); // gone, or not ours to describe
        }
      }
      f.str(name).str(id).i16(error);
    }
    return f.done();
  }

  /**
   * Log offsets of the partitions in {@code request} (repeated: topic, i32 count, partitions): per
   * partition, in order, the log start offset, the high watermark, the last stable offset (-1 when
   * {@code stable} is false or unknown) and an error code (Kafka's; 0 for none) -- one ListOffsets
   * per spec, each grouped by leader by the client, all three in flight together.
   */
  public byte[] listOffsets(byte[] request, boolean stable) throws Exception {
    Frames.Reader in = new Frames.Reader(request);
    List<TopicPartition> tps = new ArrayList<>();
    while (in.more()) {
      String topic = in.str();
      int n = in.i32();
      for (int i = 0; i < n; i++) {
        tps.add(new TopicPartition(topic, in.i32()));
      }
    }
    ListOffsetsResult earliest = list(tps, OffsetSpec.earliest(), IsolationLevel.READ_UNCOMMITTED);
    ListOffsetsResult latest = list(tps, OffsetSpec.latest(), IsolationLevel.READ_UNCOMMITTED);
    ListOffsetsResult lso = stable ? list(tps, OffsetSpec.latest(), IsolationLevel.READ_COMMITTED) : null;
    Frames f = new Frames();
    for (TopicPartition tp : tps) {
      short[] error = {0};
      f.i64(offset(earliest, tp, error)).i64(offset(latest, tp, error))
          .i64(lso == null ? -1 : offset(lso, tp, error)).i16(error[0]);
    }
    return f.done();
  }

  private ListOffsetsResult list(List<TopicPartition> tps, OffsetSpec spec, IsolationLevel isolation) {
    Map<TopicPartition, OffsetSpec> request = new LinkedHashMap<>();
    for (TopicPartition tp : tps) {
      request.put(tp, spec);
    }
    return admin.listOffsets(request, new ListOffsetsOptions(isolation).timeoutMs(timeoutMs));
  }

  private static long offset(ListOffsetsResult result, TopicPartition tp, short[] error) {
    try {
      return result.partitionResult(tp).get().offset();
    } catch (ExecutionException e) {
      if (error[0] == 0) {
        error[0] = Errors.forException(e.getCause()).code();
      }
      return -1;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      error[0] = Errors.UNKNOWN_SERVER_ERROR.code();
      return -1;
    }
  }

  /** Create {@code name} unless it exists (true: created); replication is the broker's default. */
  public boolean createTopic(String name, int partitions, boolean compacted) throws Exception {
    NewTopic topic = new NewTopic(name, java.util.Optional.of(partitions), java.util.Optional.empty());
    if (compacted) {
      topic.configs(Map.of("cleanup.policy", "compact"));
    }
    try {
      get(admin.createTopics(List.of(topic)).all());
      return true;
    } catch (TopicExistsException e) {
      return false;
    }
  }

  /** Closes the client (its connections and threads). */
  public void close() throws Exception {
    admin.close(Duration.ofSeconds(5));
  }
}
