package io.github.coordinatormirror.kafka;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * A topic read from its start to the end seen when its partitions are assigned -- the high watermark, or under read_committed the last stable offset -- by Kafka's own
 * consumer with the mirror's {@code kafka_options} as given ({@code capture}). No consumer group:
 * partitions are assigned, nothing is committed, so no group ACL is needed.
 */
public final class TopicDump {
  private final KafkaConsumer<byte[], byte[]> consumer;
  private final Map<TopicPartition, Long> ends = new HashMap<>();

  public TopicDump(Map<String, String> props, long timeoutMs) {
    Map<String, Object> conf = new HashMap<>();
    conf.put(ConsumerConfig.CLIENT_ID_CONFIG, "coordinator-mirror-capture");
    conf.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 5000);
    conf.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, (int) timeoutMs);
    conf.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, (int) Math.min(timeoutMs, 30_000));
    conf.putAll(ClusterReads.only(props, ConsumerConfig.configNames()));
    // what capture must control, whatever the options say
    conf.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
    conf.remove(ConsumerConfig.GROUP_ID_CONFIG);
    conf.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
    conf.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class);
    consumer = new KafkaConsumer<>(conf);
  }

  /** The topic's partition numbers, ascending; an empty array when the topic does not exist. */
  public int[] partitions(String topic) throws Exception {
        List<PartitionInfo> infos = consumer.partitionsFor(topic);
    if (infos == null) {
      return new int[0];
    }
    int[] out = infos.stream().mapToInt(PartitionInfo::partition).sorted().toArray();
    return out;
  }

  /**
   * Assign every partition of {@code topic} that has records, each from its start; returns, per
   * partition, {partition, log start, end} (the end under the isolation level).
   */
  public long[] assign(String topic, int[] partitions) throws Exception {
        List<TopicPartition> tps = new ArrayList<>();
    for (int p : partitions) {
      tps.add(new TopicPartition(topic, p));
    }
    Map<TopicPartition, Long> ends = consumer.endOffsets(tps);
    Map<TopicPartition, Long> starts = consumer.beginningOffsets(tps);
    List<TopicPartition> open = new ArrayList<>();
    long[] out = new long[3 * tps.size()];
    for (int i = 0; i < tps.size(); i++) {
      TopicPartition tp = tps.get(i);
      out[3 * i] = tp.partition();
      out[3 * i + 1] = starts.get(tp);
      out[3 * i + 2] = ends.get(tp);
      this.ends.put(tp, ends.get(tp));
      if (ends.get(tp) > starts.get(tp)) {
        open.add(tp);
      }
    }
    consumer.assign(open); // a partition with nothing to read is not fetched at all
    consumer.seekToBeginning(open);
    return out;
  }

  /**
   * Follow {@code topic} with no end (the mirror's preview): {@code positions} holds {partition,
   * offset} pairs, each partition read from that offset on. A position below the partition's log
   * start (records removed meanwhile) reads from the log start.
   */
  public void follow(String topic, long[] positions) throws Exception {
    List<TopicPartition> tps = new ArrayList<>();
    for (int i = 0; i + 1 < positions.length; i += 2) {
      TopicPartition tp = new TopicPartition(topic, (int) positions[i]);
      tps.add(tp);
      ends.put(tp, Long.MAX_VALUE);
    }
    consumer.assign(tps);
    Map<TopicPartition, Long> starts = consumer.beginningOffsets(tps);
    for (int i = 0; i + 1 < positions.length; i += 2) {
      TopicPartition tp = tps.get(i / 2);
      consumer.seek(tp, Math.max(positions[i + 1], starts.get(tp)));
    }
  }

  /**
   * One poll: i32 partition count and per assigned partition its number and position after the poll
   * (past transaction markers and aborted records, which read_committed skips); then i32 record
   * count and per record i32 partition, i64 offset, i64 timestamp, key and value (null: a
   * tombstone), each partition's in offset order. Records at or past a partition's end are left
   * out, and a partition that reached its end is paused.
   */
  public byte[] poll(long timeoutMs) throws Exception {
        ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(timeoutMs));
    List<ConsumerRecord<byte[], byte[]>> kept = new ArrayList<>();
    for (ConsumerRecord<byte[], byte[]> r : records) {
      if (r.offset() < ends.get(new TopicPartition(r.topic(), r.partition()))) {
        kept.add(r);
      }
    }
    Frames f = new Frames().i32(consumer.assignment().size());
    List<TopicPartition> done = new ArrayList<>();
    for (TopicPartition tp : consumer.assignment()) {
      long position = consumer.position(tp);
      f.i32(tp.partition()).i64(position);
      if (position >= ends.get(tp)) {
        done.add(tp);
      }
    }
    consumer.pause(done);
    f.i32(kept.size());
    for (ConsumerRecord<byte[], byte[]> r : kept) {
      f.i32(r.partition()).i64(r.offset()).i64(r.timestamp()).bin(r.key()).bin(r.value());
    }
    return f.done();
  }

  /**
   * Polls until {@code maxRecords} records are in hand, a poll returns none or every partition
   * reached its end; the answer in columns, for a reader that turns it into arrays without a
   * step per record: i32 partition count and per assigned partition its number and position (as
   * {@link #poll}); i32 record count n; then i32[n] partitions, i64[n] offsets, i64[n]
   * timestamps, i32[n] key lengths, i32[n] value lengths (-1: a tombstone), the keys' bytes and
   * the values' bytes, each concatenated. Records at or past a partition's end are left out.
   */
  public byte[] pollColumns(long timeoutMs, int maxRecords) throws Exception {
    List<ConsumerRecord<byte[], byte[]>> kept = new ArrayList<>();
    while (kept.size() < maxRecords) {
      ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(kept.isEmpty() ? timeoutMs : 0));
      for (ConsumerRecord<byte[], byte[]> r : records) {
        if (r.offset() < ends.get(new TopicPartition(r.topic(), r.partition()))) {
          kept.add(r);
        }
      }
      List<TopicPartition> done = new ArrayList<>();
      for (TopicPartition tp : consumer.assignment()) {
        if (consumer.position(tp) >= ends.get(tp)) {
          done.add(tp);
        }
      }
      consumer.pause(done);
      if (records.isEmpty() || consumer.paused().size() == consumer.assignment().size()) {
        break;
      }
    }
    int n = kept.size();
    long keyBytes = 0;
    long valueBytes = 0;
    for (ConsumerRecord<byte[], byte[]> r : kept) {
      keyBytes += r.key() == null ? 0 : r.key().length;
      valueBytes += r.value() == null ? 0 : r.value().length;
    }
    java.nio.ByteBuffer buf =
        java.nio.ByteBuffer.allocate(
            Math.toIntExact(8 + 12L * consumer.assignment().size() + 28L * n + keyBytes + valueBytes));
    buf.putInt(consumer.assignment().size());
    for (TopicPartition tp : consumer.assignment()) {
      buf.putInt(tp.partition()).putLong(consumer.position(tp));
    }
    buf.putInt(n);
    for (ConsumerRecord<byte[], byte[]> r : kept) {
      buf.putInt(r.partition());
    }
    for (ConsumerRecord<byte[], byte[]> r : kept) {
      buf.putLong(r.offset());
    }
    for (ConsumerRecord<byte[], byte[]> r : kept) {
      buf.putLong(r.timestamp());
    }
    for (ConsumerRecord<byte[], byte[]> r : kept) {
      buf.putInt(r.key() == null ? -1 : r.key().length);
    }
    for (ConsumerRecord<byte[], byte[]> r : kept) {
      buf.putInt(r.value() == null ? -1 : r.value().length);
    }
    for (ConsumerRecord<byte[], byte[]> r : kept) {
      if (r.key() != null) {
        buf.put(r.key());
      }
    }
    for (ConsumerRecord<byte[], byte[]> r : kept) {
      if (r.value() != null) {
        buf.put(r.value());
      }
    }
    return buf.array();
  }

  /**
   * {@link #pollColumns} written to the file {@code path} (replaced) instead of returned: py4j
   * carries a byte array as base64 text at ~15 MB/s, a local file moves at the disk cache's speed.
   * Returns the bytes written.
   */
  public long pollColumnsTo(long timeoutMs, int maxRecords, String path) throws Exception {
    byte[] frame = pollColumns(timeoutMs, maxRecords);
    java.nio.file.Files.write(java.nio.file.Path.of(path), frame);
    return frame.length;
  }

  /** Makes the call blocked in the consumer (or its next one) throw: a read stopped from outside. */
  public void wakeup() {
    consumer.wakeup();
  }

  public void close() throws Exception {
    consumer.close(org.apache.kafka.clients.consumer.CloseOptions.timeout(Duration.ofSeconds(5)));
  }
}
