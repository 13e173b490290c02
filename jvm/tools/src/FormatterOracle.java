// FormatterOracle: prints, for each `__consumer_offsets` record given on stdin, what Kafka's OWN
// code makes of its bytes -- the oracle our Python decoders are checked against (tests/vectors,
// tests/test_decoders/test_real_broker.py).  Our code only feeds bytes in and collects output; all
// decoding is done by the Kafka classes on the classpath.
//
//   java -cp 'jvm/lib/kafka-V/*:jvm/lib/tools-4.3.1' FormatterOracle < records.txt
//
// tests/support/decoders_oracle.py feeds it captures and compares its output with our decoders, e.g.
//   .venv/bin/python -m tests.support.decoders_oracle CAPTURE.jsonl [--jars 3.9.2]
//
//   java -cp ... FormatterOracle --share-group-state < records.txt
//     the same for records of `__share_group_state` (the share coordinator's ShareSnapshot K=0 /
//     ShareUpdate K=1): formatter ShareGroupStateMessageFormatter, serde ShareCoordinatorRecordSerde
//     + the share coordinator's generated converters (`kafka-dump-log --share-group-state-decoder`'s
//     path).  4.x jars only.
//
// Input, one record per line:   PARTITION OFFSET KEYHEX VALUEHEX     (VALUEHEX "-" = tombstone)
// Output, one JSON object per input line, same order:
//   {"partition":P,"offset":O,"type":K,
//    "formatters":{"OffsetsMessageFormatter":"<exactly what writeTo printed>", ...},
//    "serde":{"key":{"type":K,"data":{...}},"value":null|{"version":V,"data":{...}}}
//            | {"error":"<exception>"},
//    "consumerProtocol":{"members":[{"memberId":M,"subscription":{"version":S,...},"assignment":{...}}]}}
//
// "formatters" holds the console-consumer formatters (org.apache.kafka.tools.consumer.*, the
// classes `kafka-console-consumer --formatter` loads), called through their public
// MessageFormatter.writeTo(ConsumerRecord, PrintStream) API; a formatter that printed nothing for
// the record is left out, one that threw is recorded as "!exception: ...".
// "serde" is the path `kafka-dump-log --offsets-decoder` takes, for every record type: the group
// coordinator's record serde, then the generated JSON converters of the deserialized messages.
// "consumerProtocol" (K=2 values of "consumer" groups only) is what `kafka-dump-log
// --offsets-decoder` substitutes for each member's subscription/assignment bytes: the leading
// int16 version, then Kafka's ConsumerProtocolSubscription / ConsumerProtocolAssignment read at
// that version and printed by their generated JSON converters ({"error": ...} where Kafka's
// reader throws -- dump-log then keeps the base64).
//
// Compiled against the 4.3.1 jars (Makefile rule for jvm/tools/src), but it links only to classes
// that exist in both 3.9 and 4.x (kafka-clients, jackson) and reaches the version-specific serde
// and converter classes by reflection, so it also runs on the 3.9.2 classpath:
//   4.x:  org.apache.kafka.coordinator.group.GroupCoordinatorRecordSerde (key() is an ApiMessage)
//         + org.apache.kafka.coordinator.group.generated.CoordinatorRecordJsonConverters
//   3.9:  org.apache.kafka.coordinator.group.CoordinatorRecordSerde (key() is an
//         ApiMessageAndVersion whose version is the record type) + <Message>JsonConverter.write
// The key JSON is built as the 4.x formatters build it: {"type": K, "data": <key converter>}.

import java.io.BufferedReader;
import java.io.IOException;
import java.io.ByteArrayOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.NullNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.MessageFormatter;
import org.apache.kafka.common.message.ConsumerProtocolAssignment;
import org.apache.kafka.common.message.ConsumerProtocolAssignmentJsonConverter;
import org.apache.kafka.common.message.ConsumerProtocolSubscription;
import org.apache.kafka.common.message.ConsumerProtocolSubscriptionJsonConverter;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.common.protocol.ByteBufferAccessor;

public final class FormatterOracle {

    private static final String[] FORMATTERS = {
        "org.apache.kafka.tools.consumer.OffsetsMessageFormatter",
        "org.apache.kafka.tools.consumer.GroupMetadataMessageFormatter",
        "org.apache.kafka.tools.consumer.ShareGroupMessageFormatter",
    };
    private static final String[] SHARE_STATE_FORMATTERS = {
        "org.apache.kafka.tools.consumer.group.share.ShareGroupStateMessageFormatter",
    };

    private static final ObjectMapper MAPPER = new ObjectMapper();
    private static final JsonNodeFactory NODES = JsonNodeFactory.instance;

    private final String topic;
    private final List<MessageFormatter> formatters = new ArrayList<>();
    private final Object serde;
    private final Method deserialize;
    private final Method keyAsJson4x;    // CoordinatorRecordJsonConverters.writeRecordKeyAsJson (4.x)
    private final Method valueAsJson4x;  // CoordinatorRecordJsonConverters.writeRecordValueAsJson (4.x)

    FormatterOracle(boolean shareGroupState) throws ReflectiveOperationException {
        topic = shareGroupState ? "__share_group_state" : "__consumer_offsets";
        for (String name : shareGroupState ? SHARE_STATE_FORMATTERS : FORMATTERS) {
            Class<?> cls;
            try {
                cls = Class.forName(name);
            } catch (ClassNotFoundException e) {
                continue; // e.g. ShareGroupMessageFormatter before 4.1
            }
            MessageFormatter f = (MessageFormatter) cls.getDeclaredConstructor().newInstance();
            f.configure(Map.of());
            formatters.add(f);
        }
        Class<?> serdeClass = shareGroupState
            ? firstClass("org.apache.kafka.coordinator.share.ShareCoordinatorRecordSerde")
            : firstClass(
                "org.apache.kafka.coordinator.group.GroupCoordinatorRecordSerde",
                "org.apache.kafka.coordinator.group.CoordinatorRecordSerde");
        serde = serdeClass.getDeclaredConstructor().newInstance();
        deserialize = serdeClass.getMethod("deserialize", ByteBuffer.class, ByteBuffer.class);
        Class<?> converters = optionalClass(shareGroupState
            ? "org.apache.kafka.coordinator.share.generated.CoordinatorRecordJsonConverters"
            : "org.apache.kafka.coordinator.group.generated.CoordinatorRecordJsonConverters");
        keyAsJson4x = converters == null ? null : converters.getMethod("writeRecordKeyAsJson", ApiMessage.class);
        valueAsJson4x = converters == null ? null
            : converters.getMethod("writeRecordValueAsJson", ApiMessage.class, short.class);
    }

    public static void main(String[] args) throws Exception {
        boolean shareGroupState = args.length == 1 && args[0].equals("--share-group-state");
        if (args.length > 0 && !shareGroupState) {
            System.err.println("usage: FormatterOracle [--share-group-state] < lines of 'PARTITION OFFSET KEYHEX VALUEHEX|-'");
            System.exit(2);
        }
        FormatterOracle oracle = new FormatterOracle(shareGroupState);
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        int lineNo = 0;
        while ((line = in.readLine()) != null) {
            lineNo++;
            line = line.trim();
            if (line.isEmpty()) continue;
            String[] parts = line.split(" ");
            if (parts.length != 4) {
                System.err.println("line " + lineNo + ": expected 4 fields, got " + parts.length);
                System.exit(2);
            }
            int partition = Integer.parseInt(parts[0]);
            long offset = Long.parseLong(parts[1]);
            byte[] key = hex(parts[2]);
            byte[] value = parts[3].equals("-") ? null : hex(parts[3]);
            out.println(MAPPER.writeValueAsString(oracle.describe(partition, offset, key, value)));
        }
        out.flush();
    }

    ObjectNode describe(int partition, long offset, byte[] key, byte[] value) {
        ObjectNode node = new ObjectNode(NODES);
        node.put("partition", partition);
        node.put("offset", offset);
        if (key.length >= 2) node.put("type", ByteBuffer.wrap(key).getShort());
        else node.putNull("type");

        ObjectNode printed = node.putObject("formatters");
        for (MessageFormatter f : formatters) {
            ConsumerRecord<byte[], byte[]> record = new ConsumerRecord<>(topic, partition, offset, key, value);
            ByteArrayOutputStream buf = new ByteArrayOutputStream();
            String text;
            try (PrintStream ps = new PrintStream(buf, true, StandardCharsets.UTF_8)) {
                f.writeTo(record, ps);
                ps.flush();
                text = buf.toString(StandardCharsets.UTF_8);
            } catch (RuntimeException e) {
                text = "!exception: " + e;
            }
            if (!text.isEmpty()) printed.put(f.getClass().getSimpleName(), text);
        }
        JsonNode serde = serde(key, value);
        node.set("serde", serde);
        JsonNode data = serde.path("value").path("data");
        if (topic.equals("__consumer_offsets") && serde.path("key").path("type").asInt() == 2 && "consumer".equals(data.path("protocolType").asText(null))
                && data.path("members").isArray()) {
            ArrayNode members = node.putObject("consumerProtocol").putArray("members");
            for (JsonNode m : data.path("members")) {
                ObjectNode member = members.addObject();
                member.set("memberId", m.get("memberId"));
                member.set("subscription", embedded(m.get("subscription"), true));
                member.set("assignment", embedded(m.get("assignment"), false));
            }
        }
        return node;
    }

    private JsonNode serde(byte[] key, byte[] value) {
        ObjectNode out = new ObjectNode(NODES);
        try {
            Object record = deserialize.invoke(serde, ByteBuffer.wrap(key), value == null ? null : ByteBuffer.wrap(value));
            Object k = call(record, "key");
            Object v = call(record, "value");
            short type = ByteBuffer.wrap(key).getShort();
            ObjectNode keyNode = out.putObject("key");
            keyNode.put("type", type);
            if (isMessageAndVersion(k)) { // 3.9: the key's "version" is the record type
                keyNode.set("data", convert((ApiMessage) call(k, "message"), (Short) call(k, "version")));
            } else if (keyAsJson4x != null) {
                keyNode.set("data", (JsonNode) keyAsJson4x.invoke(null, k));
            } else {
                keyNode.set("data", convert((ApiMessage) k, (short) 0));
            }
            if (v == null) {
                out.set("value", NullNode.getInstance());
            } else {
                ApiMessage message = (ApiMessage) call(v, "message");
                short version = (Short) call(v, "version");
                ObjectNode valueNode = out.putObject("value");
                valueNode.put("version", version);
                valueNode.set("data", valueAsJson4x != null
                    ? (JsonNode) valueAsJson4x.invoke(null, message, version)
                    : convert(message, version));
            }
            return out;
        } catch (InvocationTargetException e) {
            return error(e.getCause());
        } catch (ReflectiveOperationException | RuntimeException e) {
            return error(e);
        }
    }

    /** One embedded blob read as DumpLogSegments reads it (see the header). */
    private static JsonNode embedded(JsonNode base64, boolean subscription) {
        try {
            ByteBufferAccessor accessor = new ByteBufferAccessor(ByteBuffer.wrap(base64.binaryValue()));
            short version = accessor.readShort();
            ObjectNode out = new ObjectNode(NODES);
            out.put("version", version);
            out.setAll((ObjectNode) (subscription
                ? ConsumerProtocolSubscriptionJsonConverter.write(new ConsumerProtocolSubscription(accessor, version), version)
                : ConsumerProtocolAssignmentJsonConverter.write(new ConsumerProtocolAssignment(accessor, version), version)));
            return out;
        } catch (IOException | RuntimeException e) {
            return error(e);
        }
    }

    /** The generated converter of a message class: {@code <Message>JsonConverter.write(msg, version)}. */
    private static JsonNode convert(ApiMessage message, short version) throws ReflectiveOperationException {
        Class<?> converter = Class.forName(message.getClass().getName() + "JsonConverter");
        Method write = converter.getMethod("write", message.getClass(), short.class);
        return (JsonNode) write.invoke(null, message, version);
    }

    private static JsonNode error(Throwable e) {
        ObjectNode out = new ObjectNode(NODES);
        out.put("error", String.valueOf(e));
        return out;
    }

    private static boolean isMessageAndVersion(Object o) {
        return o != null && o.getClass().getName().endsWith(".ApiMessageAndVersion");
    }

    private static Object call(Object target, String method) throws ReflectiveOperationException {
        return target.getClass().getMethod(method).invoke(target);
    }

    private static Class<?> optionalClass(String name) {
        try {
            return Class.forName(name);
        } catch (ClassNotFoundException e) {
            return null;
        }
    }

    private static Class<?> firstClass(String... names) throws ClassNotFoundException {
        for (String name : names) {
            Class<?> cls = optionalClass(name);
            if (cls != null) return cls;
        }
        throw new ClassNotFoundException(String.join(" | ", names));
    }

    private static byte[] hex(String s) {
        if (s.length() % 2 != 0) throw new IllegalArgumentException("odd-length hex");
        byte[] out = new byte[s.length() / 2];
        for (int i = 0; i < out.length; i++) {
            out[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
        }
        return out;
    }
}
