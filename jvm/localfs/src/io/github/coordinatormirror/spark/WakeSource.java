package io.github.coordinatormirror.spark;

import java.util.Collections;
import java.util.EnumSet;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.SupportsAdmissionControl;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * A streaming source with no rows that has new data when the driver says so: the mirror's wake.
 *
 * <p>The mirror's query keeps each group's state in {@code applyInPandasWithState} with
 * processing-time timeouts (the offsets' expiry deadlines).  Spark fires a timeout only in a
 * micro-batch, and for processing-time timeouts it runs one at every trigger whether or not any
 * source has new data -- most of a quiet mirror's CPU.  With
 * {@code spark.sql.streaming.noDataMicroBatches.enabled=false} it runs a batch only for new data;
 * this source is how the driver asks for one when a deadline is due: {@link Wakes#wake(String)}
 * gives the stream of that key new data (its offset moves on by one), the next trigger runs a
 * micro-batch, and every timeout due by then fires in it.  It never has rows: each batch plans no
 * partition of it, so no task ever runs its reader.
 *
 * <p>Its offset is a plain number ({@code "42"}), as Spark's {@code rate} source's is, so it takes
 * the rate source's place in a checkpoint made with one (the mirror's tick source until now): a
 * query reads its sources' offsets by position, and a number restores as a number.
 *
 * <p>Read as {@code spark.readStream.schema(...).format("io.github.coordinatormirror.spark.WakeSource")
 * .option("key", checkpoint)}: the schema is the caller's (a union needs the other side's columns).
 */
public final class WakeSource implements TableProvider {

  /** The wakes asked for, per key (the query's checkpoint): the driver's side, through py4j. */
  public static final class Wakes {
    private static final Map<String, AtomicLong> COUNTS = new ConcurrentHashMap<>();

    private Wakes() {}

    /** The query reading {@code key} runs a micro-batch at its next trigger. */
    public static long wake(String key) {
      return COUNTS.computeIfAbsent(key, k -> new AtomicLong()).incrementAndGet();
    }

    /** Wakes asked for {@code key} so far in this JVM. */
    public static long count(String key) {
      AtomicLong n = COUNTS.get(key);
      return n == null ? 0L : n.get();
    }
  }

  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    throw new IllegalArgumentException("the wake source takes its schema from the reader (.schema(...))");
  }

  @Override
  public boolean supportsExternalMetadata() {
    return true;
  }

  @Override
  public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
    String key = properties.get("key");
    if (key == null || key.isEmpty()) {
      throw new IllegalArgumentException("the wake source needs its key (.option(\"key\", ...))");
    }
    return new WakeTable(schema, key);
  }

  static final class WakeTable implements Table, SupportsRead {
    private final StructType schema;
    private final String key;

    WakeTable(StructType schema, String key) {
      this.schema = schema;
      this.key = key;
    }

    @Override
    public String name() {
      return "coordinator-mirror-wake";
    }

    @Override
    public StructType schema() {
      return schema;
    }

    @Override
    public Set<TableCapability> capabilities() {
      return EnumSet.of(TableCapability.MICRO_BATCH_READ);
    }

    @Override
    public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
      return () -> new Scan() {
        @Override
        public StructType readSchema() {
          return schema;
        }

        @Override
        public String description() {
          return "coordinator-mirror wake";
        }

        @Override
        public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
          return new WakeStream(key);
        }
      };
    }
  }

  /** A number: the wakes seen, going on from where the checkpoint left it. */
  static final class WakeOffset extends Offset {
    final long value;

    WakeOffset(long value) {
      this.value = value;
    }

    @Override
    public String json() {
      return Long.toString(value);
    }
  }

  static final class WakeStream implements MicroBatchStream, SupportsAdmissionControl {
    private final String key;
    /** The wake count when this stream last reported new data (or was made). */
    private long seen;

    WakeStream(String key) {
      this.key = key;
      this.seen = Wakes.count(key);
    }

    @Override
    public Offset initialOffset() {
      return new WakeOffset(0L);
    }

    @Override
    public Offset deserializeOffset(String json) {
      return new WakeOffset(Long.parseLong(json.trim()));
    }

    @Override
    public Offset latestOffset() {
      throw new UnsupportedOperationException("latestOffset(Offset, ReadLimit) is the one to call");
    }

    @Override
    public synchronized Offset latestOffset(Offset start, ReadLimit limit) {
      long from = start == null ? 0L : Long.parseLong(start.json().trim());
      long wakes = Wakes.count(key);
      if (wakes > seen) {
        seen = wakes;
        return new WakeOffset(from + 1);
      }
      return new WakeOffset(from);
    }

    @Override
    public ReadLimit getDefaultReadLimit() {
      return ReadLimit.allAvailable();
    }

    @Override
    public InputPartition[] planInputPartitions(Offset start, Offset end) {
      return new InputPartition[0];
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
      return new NoReader();
    }

    @Override
    public void commit(Offset end) {}

    @Override
    public void stop() {}
  }

  /** Never asked for a reader: a wake's batch plans no partition of this source. */
  static final class NoReader implements PartitionReaderFactory {
    private static final long serialVersionUID = 1L;

    @Override
    public PartitionReader<InternalRow> createReader(InputPartition partition) {
      throw new IllegalStateException("the wake source has no rows");
    }
  }
}
