// GroupProbe: asks a broker what its group coordinator holds, through Kafka's own Java
// AdminClient -- the only client that reports KIP-848 / share / streams epochs -- and prints one
// JSON object per group on stdout.  Also runs a tiny Kafka Streams application so that scenarios
// can create KIP-1071 streams groups.  Part of the test/demo harness; compiled by `make jars`.
//
//   java -cp 'jvm/lib/kafka-V/*:jvm/lib/tools-V' GroupProbe describe BOOTSTRAP GROUP...
//   java -cp ... GroupProbe streams BOOTSTRAP APP_ID INPUT_TOPIC OUTPUT_TOPIC SECONDS

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.MemberAssignment;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.admin.ShareMemberDescription;
import org.apache.kafka.clients.admin.StreamsGroupDescription;
import org.apache.kafka.clients.admin.StreamsGroupMemberAssignment;
import org.apache.kafka.clients.admin.StreamsGroupMemberDescription;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.GroupIdNotFoundException;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;

public final class GroupProbe {

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: GroupProbe describe BOOTSTRAP GROUP... | streams BOOTSTRAP APP_ID IN OUT SECONDS");
            System.exit(2);
        }
        switch (args[0]) {
            case "describe" -> describe(args[1], List.of(args).subList(2, args.length));
            case "streams" -> streams(args[1], args[2], args[3], args[4], Integer.parseInt(args[5]));
            default -> {
                System.err.println("unknown command " + args[0]);
                System.exit(2);
            }
        }
    }

    // ---------------------------------------------------------------------------------- describe
    static void describe(String bootstrap, List<String> groups) throws Exception {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "60000");
        try (Admin admin = Admin.create(props)) {
            Map<String, GroupListing> listed = new TreeMap<>();
            for (GroupListing g : admin.listGroups().all().get()) listed.put(g.groupId(), g);
            for (String id : groups) {
                GroupListing listing = listed.get(id);
                StringBuilder out = new StringBuilder("{");
                field(out, "group_id", id);
                if (listing == null) {
                    out.append(",\"exists\":false");
                    appendOffsets(admin, id, out);
                    System.out.println(out.append('}'));
                    continue;
                }
                GroupType type = listing.type().orElse(GroupType.CLASSIC);
                StringBuilder body = new StringBuilder();
                field(body.append(','), "type", type.toString());
                field(body.append(','), "protocol", listing.protocol());
                try {
                    switch (type) {
                        case SHARE -> appendShare(admin.describeShareGroups(List.of(id)).all().get().get(id), body);
                        case STREAMS -> appendStreams(admin.describeStreamsGroups(List.of(id)).all().get().get(id), body);
                        default -> appendConsumer(admin.describeConsumerGroups(List.of(id)).all().get().get(id), body);
                    }
                } catch (ExecutionException e) {
                    if (!(e.getCause() instanceof GroupIdNotFoundException)) throw e;
                    // deleted between the listing and the describe (e.g. the coordinator's sweep)
                    out.append(",\"exists\":false");
                    appendOffsets(admin, id, out);
                    System.out.println(out.append('}'));
                    continue;
                }
                out.append(",\"exists\":true").append(body);
                if (type != GroupType.SHARE) appendOffsets(admin, id, out);
                System.out.println(out.append('}'));
            }
        }
    }

    static void appendConsumer(ConsumerGroupDescription d, StringBuilder out) {
        field(out.append(','), "state", d.groupState().toString());
        field(out.append(','), "assignor", d.partitionAssignor());
        out.append(",\"simple\":").append(d.isSimpleConsumerGroup());
        optInt(out, "group_epoch", d.groupEpoch());
        optInt(out, "target_assignment_epoch", d.targetAssignmentEpoch());
        out.append(",\"members\":[");
        boolean first = true;
        for (MemberDescription m : d.members()) {
            if (!first) out.append(',');
            first = false;
            out.append('{');
            field(out, "member_id", m.consumerId());
            optStr(out, "group_instance_id", m.groupInstanceId());
            optStr(out, "rack_id", m.rackId());
            field(out.append(','), "client_id", m.clientId());
            field(out.append(','), "host", m.host());
            out.append(",\"assignment\":");
            partitions(out, m.assignment());
            if (m.targetAssignment().isPresent()) {
                out.append(",\"target_assignment\":");
                partitions(out, m.targetAssignment().get());
            }
            optInt(out, "member_epoch", m.memberEpoch());
            m.upgraded().ifPresent(u -> out.append(",\"upgraded\":").append(u));
            out.append('}');
        }
        out.append(']');
    }

    static void appendShare(ShareGroupDescription d, StringBuilder out) {
        field(out.append(','), "state", d.groupState().toString());
        out.append(",\"group_epoch\":").append(d.groupEpoch());
        out.append(",\"target_assignment_epoch\":").append(d.targetAssignmentEpoch());
        out.append(",\"members\":[");
        boolean first = true;
        for (ShareMemberDescription m : d.members()) {
            if (!first) out.append(',');
            first = false;
            out.append('{');
            field(out, "member_id", m.consumerId());
            optStr(out, "rack_id", m.rackId());
            field(out.append(','), "client_id", m.clientId());
            field(out.append(','), "host", m.host());
            out.append(",\"assignment\":");
            List<TopicPartition> tps = new ArrayList<>(m.assignment().topicPartitions());
            partitionList(out, tps);
            out.append(",\"member_epoch\":").append(m.memberEpoch());
            out.append('}');
        }
        out.append(']');
    }

    static void appendStreams(StreamsGroupDescription d, StringBuilder out) {
        field(out.append(','), "state", d.groupState().toString());
        out.append(",\"group_epoch\":").append(d.groupEpoch());
        out.append(",\"target_assignment_epoch\":").append(d.targetAssignmentEpoch());
        out.append(",\"topology_epoch\":").append(d.topologyEpoch());
        out.append(",\"members\":[");
        boolean first = true;
        for (StreamsGroupMemberDescription m : d.members()) {
            if (!first) out.append(',');
            first = false;
            out.append('{');
            field(out, "member_id", m.memberId());
            optStr(out, "group_instance_id", m.instanceId());
            optStr(out, "rack_id", m.rackId());
            field(out.append(','), "client_id", m.clientId());
            field(out.append(','), "host", m.clientHost());
            field(out.append(','), "process_id", m.processId());
            out.append(",\"member_epoch\":").append(m.memberEpoch());
            out.append(",\"topology_epoch\":").append(m.topologyEpoch());
            out.append(",\"active_tasks\":");
            tasks(out, m.assignment().activeTasks());
            out.append(",\"standby_tasks\":");
            tasks(out, m.assignment().standbyTasks());
            out.append('}');
        }
        out.append(']');
    }

    static void appendOffsets(Admin admin, String id, StringBuilder out) {
        out.append(",\"offsets\":[");
        try {
            Map<TopicPartition, OffsetAndMetadata> offsets =
                admin.listConsumerGroupOffsets(id).partitionsToOffsetAndMetadata().get();
            Map<String, OffsetAndMetadata> sorted = new TreeMap<>();
            for (var e : offsets.entrySet()) {
                if (e.getValue() != null) sorted.put(e.getKey().topic() + "\u0000" + String.format("%08d", e.getKey().partition()), e.getValue());
            }
            boolean first = true;
            for (var e : sorted.entrySet()) {
                String[] tp = e.getKey().split("\u0000");
                OffsetAndMetadata om = e.getValue();
                if (!first) out.append(',');
                first = false;
                out.append('{');
                field(out, "topic", tp[0]);
                out.append(",\"partition\":").append(Integer.parseInt(tp[1]));
                out.append(",\"offset\":").append(om.offset());
                optInt(out, "leader_epoch", om.leaderEpoch());
                field(out.append(','), "metadata", om.metadata());
                out.append('}');
            }
        } catch (ExecutionException | InterruptedException e) {
            if (!(e.getCause() instanceof GroupIdNotFoundException)) {
                out.append("],\"offsets_error\":");
                str(out, String.valueOf(e.getCause()));
                return;
            }
        }
        out.append(']');
    }

    static void partitions(StringBuilder out, MemberAssignment a) {
        partitionList(out, new ArrayList<>(a.topicPartitions()));
    }

    static void partitionList(StringBuilder out, List<TopicPartition> tps) {
        tps.sort((x, y) -> x.topic().equals(y.topic()) ? Integer.compare(x.partition(), y.partition()) : x.topic().compareTo(y.topic()));
        out.append('[');
        for (int i = 0; i < tps.size(); i++) {
            if (i > 0) out.append(',');
            out.append('[');
            str(out, tps.get(i).topic());
            out.append(',').append(tps.get(i).partition()).append(']');
        }
        out.append(']');
    }

    static void tasks(StringBuilder out, Collection<StreamsGroupMemberAssignment.TaskIds> tasks) {
        out.append('[');
        boolean first = true;
        for (var t : tasks) {
            if (!first) out.append(',');
            first = false;
            out.append('{');
            field(out, "subtopology", t.subtopologyId());
            out.append(",\"partitions\":").append(t.partitions());
            out.append('}');
        }
        out.append(']');
    }

    static void optInt(StringBuilder out, String name, Optional<Integer> v) {
        v.ifPresent(i -> out.append(",\"").append(name).append("\":").append(i));
    }

    static void optStr(StringBuilder out, String name, Optional<String> v) {
        if (v.isPresent()) field(out.append(','), name, v.get());
    }

    static void field(StringBuilder out, String name, String value) {
        out.append('"').append(name).append("\":");
        str(out, value);
    }

    static void str(StringBuilder out, String s) {
        if (s == null) {
            out.append("null");
            return;
        }
        out.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> out.append("\\\"");
                case '\\' -> out.append("\\\\");
                case '\n' -> out.append("\\n");
                case '\r' -> out.append("\\r");
                case '\t' -> out.append("\\t");
                default -> {
                    if (c < 0x20) out.append(String.format("\\u%04x", (int) c));
                    else out.append(c);
                }
            }
        }
        out.append('"');
    }

    // ----------------------------------------------------------------------------------- streams
    static void streams(String bootstrap, String appId, String topic, String outTopic, int seconds) throws Exception {
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, "streams");
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.ByteArraySerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.ByteArraySerde.class);
        props.put(StreamsConfig.STATE_DIR_CONFIG, System.getProperty("java.io.tmpdir") + "/cm-streams-" + appId);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "200");
        props.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(topic).filter((k, v) -> v != null).to(outTopic);
        try (KafkaStreams app = new KafkaStreams(builder.build(), props)) {
            app.start();
            long deadline = System.currentTimeMillis() + seconds * 1000L;
            // the Python side that started us: once it is gone, nobody will ever send 'q'
            ProcessHandle parent = ProcessHandle.current().parent().orElse(null);
            while (System.currentTimeMillis() < deadline && (parent == null || parent.isAlive())) {
                if (System.in.available() > 0 && System.in.read() == 'q') break;
                Thread.sleep(100);
            }
            app.close(Duration.ofSeconds(20));
        }
        System.out.println("{\"streams\":\"closed\"}");
    }
}
