package kafkaiggy.compat;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;

/** The Admin client: topics, partitions, the cluster, configs, groups and their offsets, offsets by spec, records. */
final class AdminCases {
    private AdminCases() {}

    static void register() {
        JavaCompat.add("admin_topics_create_list_describe_delete", true,
                List.of("TOPIC-MAPPING-1", "TOPIC-EXISTS-1", "METADATA-1", "DELETETOPICS-1"), AdminCases::topics);
        JavaCompat.add("admin_create_partitions", false, List.of("TOPIC-ADD-PARTITIONS-1"), AdminCases::createPartitions);
        JavaCompat.add("admin_describe_cluster", true, List.of("DESCRIBECLUSTER-1", "DESCRIBECLUSTER-2"), AdminCases::describeCluster);
        JavaCompat.add("admin_describe_configs", false, List.of("DESCRIBECONFIGS-2"), AdminCases::describeConfigs);
        JavaCompat.add("admin_incremental_alter_configs", false,
                List.of("ALTERCONFIGS-1", "ALTERCONFIGS-3", "ALTERCONFIGS-6", "TOPIC-CONFIG-2"), AdminCases::incrementalAlterConfigs);
        JavaCompat.add("admin_alter_configs_legacy", false, List.of("ALTERCONFIGS-5", "ALTERCONFIGS-1"),
                AdminCases::alterConfigsLegacy);
        JavaCompat.add("admin_list_and_describe_consumer_groups", false,
                List.of("LISTGROUPS-COORDINATED-1", "DESCRIBEGROUPS-STATE-1", "DESCRIBEGROUPS-MEMBERS-1"), AdminCases::listDescribeGroups);
        JavaCompat.add("admin_consumer_group_offsets", true,
                List.of("CO-KEY-1", "CO-FETCH-ALL-1", "GROUP-COMMIT-1", "OFFSETDELETE-1", "OFFSETDELETE-2"), AdminCases::groupOffsets);
        JavaCompat.add("admin_delete_consumer_groups", false, List.of("GROUP-DELETE-1"), AdminCases::deleteGroups);
        JavaCompat.add("admin_list_offsets", false,
                List.of("LISTOFFSETS-EARLIEST-1", "LISTOFFSETS-LATEST-1", "LISTOFFSETS-TIMESTAMP-1"), AdminCases::listOffsets);
        JavaCompat.add("tools_consumer_groups_describe_lag", false,
                List.of("CO-FETCH-ALL-1", "LISTOFFSETS-LATEST-1", "DESCRIBEGROUPS-MEMBERS-1"), AdminCases::describeLag);
        JavaCompat.add("tools_consumer_groups_reset_offsets", false,
                List.of("GROUP-COMMIT-1", "LISTOFFSETS-EARLIEST-1", "LISTOFFSETS-TIMESTAMP-1", "CO-KEY-1"), AdminCases::resetOffsets);
        JavaCompat.add("admin_delete_records_refused", false, List.of("PROTO-VERSION-1", "DELETERECORDS-1"), AdminCases::deleteRecords);
    }

    static String topics(Ctx ctx) throws Exception {
        try (Admin admin = ctx.admin()) {
            String topic = ctx.createTopic(admin, "java-admin-topic", 3);
            Set<String> names = Ctx.get(admin.listTopics().names());
            Ctx.check(names.contains(topic), "listTopics does not show the new topic");
            TopicDescription d = Ctx.get(admin.describeTopics(List.of(topic)).allTopicNames()).get(topic);
            Ctx.check(d.partitions().size() == 3, "describeTopics shows " + d.partitions().size() + " partitions");
            Node leader = d.partitions().get(0).leader();
            Ctx.check(leader != null && leader.id() >= 0, "partition 0 has leader " + leader);
            Throwable again = Ctx.refused("creating it again",
                    () -> Ctx.get(admin.createTopics(List.of(new NewTopic(topic, 3, (short) 1))).all()));
            Ctx.check(again instanceof TopicExistsException, "creating it again: " + Ctx.describe(again));
            Ctx.get(admin.deleteTopics(List.of(topic)).all());
            long deadline = System.nanoTime() + Ctx.WAIT.toNanos();
            while (Ctx.get(admin.listTopics().names()).contains(topic)) {
                Ctx.check(System.nanoTime() < deadline, "the deleted topic is still listed");
            }
            Throwable gone = Ctx.refused("deleting it again", () -> Ctx.get(admin.deleteTopics(List.of(topic)).all()));
            Ctx.check(gone instanceof UnknownTopicOrPartitionException, "deleting it again: " + Ctx.describe(gone));
            return "created (3 partitions, leader " + leader.id() + "), listed, described, TopicExists on re-create, deleted, "
                    + "UnknownTopicOrPartition on re-delete";
        }
    }

    static String createPartitions(Ctx ctx) throws Exception {
        try (Admin admin = ctx.admin()) {
            String topic = ctx.createTopic(admin, "java-admin-parts", 2);
            Ctx.get(admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(5))).all());
            TopicDescription d = Ctx.get(admin.describeTopics(List.of(topic)).allTopicNames()).get(topic);
            Ctx.check(d.partitions().size() == 5, "after increaseTo(5) the topic has " + d.partitions().size());
            RecordMetadata m = ctx.produce(topic, 4, 1, "new").get(0);
            Ctx.check(m.partition() == 4, "produced to partition " + m.partition());
            Throwable fewer = Ctx.refused("decreasing to 3", () -> Ctx.get(admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(3))).all()));
            return "2 -> 5 partitions, the new partition 4 takes records; decreasing refused: " + Ctx.describe(fewer);
        }
    }

    static String describeCluster(Ctx ctx) throws Exception {
        try (Admin admin = ctx.admin()) {
            DescribeClusterResult r = admin.describeCluster();
            Collection<Node> nodes = Ctx.get(r.nodes());
            Node controller = Ctx.get(r.controller());
            String clusterId = Ctx.get(r.clusterId());
            Ctx.check(!nodes.isEmpty(), "no nodes");
            Ctx.check(controller != null && nodes.stream().anyMatch(n -> n.id() == controller.id()),
                    "the controller " + controller + " is not among the nodes " + nodes);
            Ctx.check(clusterId != null && !clusterId.isEmpty(), "no cluster id");
            return nodes.size() + " node(s) " + nodes + ", controller " + controller.id() + ", cluster id " + clusterId;
        }
    }

    static String describeConfigs(Ctx ctx) throws Exception {
        try (Admin admin = ctx.admin()) {
            String topic = ctx.createTopic(admin, "java-admin-cfg", 1);
            ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            Config config = Ctx.get(admin.describeConfigs(List.of(res)).all()).get(res);
            ConfigEntry retention = config.get("retention.ms");
            Ctx.check(retention != null, "no retention.ms in " + config.entries());
            List<String> names = new ArrayList<>();
            config.entries().forEach(e -> names.add(e.name() + "=" + e.value()));
            return "topic configs " + names;
        }
    }

    static String incrementalAlterConfigs(Ctx ctx) throws Exception {
        try (Admin admin = ctx.admin()) {
            String topic = ctx.createTopic(admin, "java-admin-alter", 1);
            ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            AlterConfigOp set = new AlterConfigOp(new ConfigEntry("retention.ms", "3600000"), AlterConfigOp.OpType.SET);
            Ctx.get(admin.incrementalAlterConfigs(Map.of(res, List.of(set))).all());
            String value = Ctx.get(admin.describeConfigs(List.of(res)).all()).get(res).get("retention.ms").value();
            Ctx.check("3600000".equals(value), "after SET retention.ms=3600000, describeConfigs shows " + value);
            List<String> refusals = new ArrayList<>();
            for (String[] kv : new String[][] {{"message.timestamp.type", "LogAppendTime"}, {"max.message.bytes", "2000000"}}) {
                AlterConfigOp op = new AlterConfigOp(new ConfigEntry(kv[0], kv[1]), AlterConfigOp.OpType.SET);
                Throwable t = Ctx.refused("SET " + kv[0], () -> Ctx.get(admin.incrementalAlterConfigs(Map.of(res, List.of(op))).all()));
                refusals.add(kv[0] + ": " + Ctx.describe(t));
            }
            AlterConfigOp delete = new AlterConfigOp(new ConfigEntry("retention.ms", ""), AlterConfigOp.OpType.DELETE);
            Ctx.get(admin.incrementalAlterConfigs(Map.of(res, List.of(delete))).all());
            String after = Ctx.get(admin.describeConfigs(List.of(res)).all()).get(res).get("retention.ms").value();
            Ctx.check("-1".equals(after), "after DELETE retention.ms, describeConfigs shows " + after);
            return "retention.ms SET 3600000 and DELETE (-1) applied; refused: " + String.join("; ", refusals);
        }
    }

    /**
     * The whole-config AlterConfigs the 3.9 tools (kafka-configs --alter) still send. kafka-clients
     * 4.0 removed Admin.alterConfigs, so the method is looked up at run time and the case is
     * skipped, saying so, on a client without it.
     */
    static String alterConfigsLegacy(Ctx ctx) throws Exception {
        java.lang.reflect.Method alter;
        try {
            alter = Admin.class.getMethod("alterConfigs", Map.class);
        } catch (NoSuchMethodException e) {
            throw new JavaCompat.Skip("this client has no Admin.alterConfigs (removed in kafka-clients 4.0); "
                    + "incrementalAlterConfigs is its only way to alter configs");
        }
        try (Admin admin = ctx.admin()) {
            String topic = ctx.createTopic(admin, "java-admin-legacy-alter", 1);
            ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            Object result = alter.invoke(admin, Map.of(res, new Config(List.of(new ConfigEntry("retention.ms", "7200000")))));
            Ctx.get((org.apache.kafka.common.KafkaFuture<?>) result.getClass().getMethod("all").invoke(result));
            String value = Ctx.get(admin.describeConfigs(List.of(res)).all()).get(res).get("retention.ms").value();
            Ctx.check("7200000".equals(value), "after alterConfigs(retention.ms=7200000) describeConfigs shows " + value);
            Object refused = alter.invoke(admin, Map.of(res, new Config(List.of(new ConfigEntry("max.message.bytes", "2000000")))));
            Throwable t = Ctx.refused("alterConfigs(max.message.bytes=2000000)",
                    () -> Ctx.get((org.apache.kafka.common.KafkaFuture<?>) refused.getClass().getMethod("all").invoke(refused)));
            Object whole = alter.invoke(admin, Map.of(res, new Config(List.of())));
            Ctx.get((org.apache.kafka.common.KafkaFuture<?>) whole.getClass().getMethod("all").invoke(whole));
            String after = Ctx.get(admin.describeConfigs(List.of(res)).all()).get(res).get("retention.ms").value();
            Ctx.check("-1".equals(after), "after alterConfigs with no entries (the whole config) retention.ms is " + after);
            return "retention.ms=7200000 applied; max.message.bytes refused (" + Ctx.describe(t)
                    + "); an empty config put retention.ms back to -1";
        }
    }

    /** A group with one subscribed member, its offsets committed. */
    private static KafkaConsumer<byte[], byte[]> memberOf(Ctx ctx, String groupId, String topic, int records) throws Exception {
        KafkaConsumer<byte[], byte[]> c = ctx.consumer(ctx.consumerProps(groupId));
        List<KafkaConsumer<byte[], byte[]>> one = List.of(c);
        int[] read = {0};
        c.subscribe(List.of(topic));
        Ctx.pollUntil(one, "the member read " + records + " records", () -> read[0] >= records, (i, rs) -> read[0] += rs.count());
        c.commitSync(Ctx.CALL);
        return c;
    }

    static String listDescribeGroups(Ctx ctx) throws Exception {
        try (Admin admin = ctx.admin()) {
            String topic = ctx.createTopic(admin, "java-admin-groups", 2);
            ctx.produce(topic, 0, 3, "v");
            String groupId = ctx.unique("java-admin-group");
            try (KafkaConsumer<byte[], byte[]> c = memberOf(ctx, groupId, topic, 3)) {
                Collection<ConsumerGroupListing> groups = Ctx.get(admin.listConsumerGroups().all());
                Ctx.check(groups.stream().anyMatch(g -> g.groupId().equals(groupId)), "listConsumerGroups does not show " + groupId);
                ConsumerGroupDescription d = Ctx.get(admin.describeConsumerGroups(List.of(groupId)).all()).get(groupId);
                Ctx.check(d.members().size() == 1, "members " + d.members());
                Ctx.check(d.members().iterator().next().assignment().topicPartitions().size() == 2,
                        "the member's assignment " + d.members().iterator().next().assignment());
                Ctx.check(String.valueOf(d.state()).equalsIgnoreCase("stable")
                        || String.valueOf(d.state()).equalsIgnoreCase("STABLE"), "state " + d.state());
                return "listed; described Stable with 1 member owning 2 partitions, assignor " + d.partitionAssignor()
                        + ", coordinator " + d.coordinator().id();
            }
        }
    }

    /** list, alter and delete a group's offsets; deleting a subscribed topic's offsets is refused. */
    static String groupOffsets(Ctx ctx) throws Exception {
        try (Admin admin = ctx.admin()) {
            String topic = ctx.createTopic(admin, "java-admin-offsets", 1);
            ctx.produce(topic, 0, 10, "v");
            String groupId = ctx.unique("java-admin-offsets-group");
            TopicPartition tp = new TopicPartition(topic, 0);
            String subscribedRefusal;
            try (KafkaConsumer<byte[], byte[]> c = memberOf(ctx, groupId, topic, 10)) {
                Map<TopicPartition, OffsetAndMetadata> listed = Ctx.get(admin.listConsumerGroupOffsets(groupId).partitionsToOffsetAndMetadata());
                Ctx.check(listed.get(tp) != null && listed.get(tp).offset() == 10, "listConsumerGroupOffsets " + listed);
                Throwable t = Ctx.refused("deleteConsumerGroupOffsets while subscribed",
                        () -> Ctx.get(admin.deleteConsumerGroupOffsets(groupId, Set.of(tp)).all()));
                subscribedRefusal = Ctx.describe(t);
            }
            // The group is empty now: its offsets may be changed from outside.
            Ctx.get(admin.alterConsumerGroupOffsets(groupId, Map.of(tp, new OffsetAndMetadata(3))).all());
            Map<TopicPartition, OffsetAndMetadata> altered = Ctx.get(admin.listConsumerGroupOffsets(groupId).partitionsToOffsetAndMetadata());
            Ctx.check(altered.get(tp) != null && altered.get(tp).offset() == 3, "after alterConsumerGroupOffsets(3): " + altered);
            Ctx.get(admin.deleteConsumerGroupOffsets(groupId, Set.of(tp)).all());
            Map<TopicPartition, OffsetAndMetadata> deleted = Ctx.get(admin.listConsumerGroupOffsets(groupId).partitionsToOffsetAndMetadata());
            Ctx.check(deleted.get(tp) == null, "after deleteConsumerGroupOffsets: " + deleted);
            return "listed 10; delete while subscribed refused (" + subscribedRefusal + "); altered to 3; deleted";
        }
    }

    static String deleteGroups(Ctx ctx) throws Exception {
        try (Admin admin = ctx.admin()) {
            String topic = ctx.createTopic(admin, "java-admin-delgroup", 1);
            ctx.produce(topic, 0, 2, "v");
            String groupId = ctx.unique("java-admin-delgroup");
            String nonEmpty;
            try (KafkaConsumer<byte[], byte[]> c = memberOf(ctx, groupId, topic, 2)) {
                nonEmpty = Ctx.describe(Ctx.refused("deleting a group with a member",
                        () -> Ctx.get(admin.deleteConsumerGroups(List.of(groupId)).all())));
            }
            Ctx.get(admin.deleteConsumerGroups(List.of(groupId)).all());
            Collection<ConsumerGroupListing> groups = Ctx.get(admin.listConsumerGroups().all());
            Ctx.check(groups.stream().noneMatch(g -> g.groupId().equals(groupId)), "the deleted group is still listed");
            Map<TopicPartition, OffsetAndMetadata> offsets = Ctx.get(admin.listConsumerGroupOffsets(groupId).partitionsToOffsetAndMetadata());
            Ctx.check(offsets.isEmpty() || offsets.values().stream().allMatch(o -> o == null), "the deleted group's offsets " + offsets);
            return "with a member refused (" + nonEmpty + "); empty: deleted, unlisted, no offsets left";
        }
    }

    static String listOffsets(Ctx ctx) throws Exception {
        try (Admin admin = ctx.admin()) {
            String topic = ctx.createTopic(admin, "java-admin-listoffsets", 1);
            TopicPartition tp = new TopicPartition(topic, 0);
            long before = System.currentTimeMillis();
            ctx.produce(topic, 0, 6, "v");
            Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> earliest = Ctx.get(admin.listOffsets(Map.of(tp, OffsetSpec.earliest())).all());
            Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> latest = Ctx.get(admin.listOffsets(Map.of(tp, OffsetSpec.latest())).all());
            Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> byTime = Ctx.get(admin.listOffsets(Map.of(tp, OffsetSpec.forTimestamp(before))).all());
            Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> ahead =
                    Ctx.get(admin.listOffsets(Map.of(tp, OffsetSpec.forTimestamp(System.currentTimeMillis() + 3_600_000L))).all());
            Ctx.check(earliest.get(tp).offset() == 0, "earliest " + earliest.get(tp));
            Ctx.check(latest.get(tp).offset() == 6, "latest " + latest.get(tp));
            Ctx.check(byTime.get(tp).offset() == 0, "by a timestamp before the records " + byTime.get(tp));
            Ctx.check(ahead.get(tp).offset() == -1, "by a timestamp an hour ahead " + ahead.get(tp));
            return "earliest 0, latest 6, by timestamp before the records 0, an hour ahead -1";
        }
    }

    /**
     * What `kafka-consumer-groups --describe` does: the group's members and committed offsets, the
     * partitions' high watermarks, and the lag between them per partition.
     */
    static String describeLag(Ctx ctx) throws Exception {
        try (Admin admin = ctx.admin()) {
            String topic = ctx.createTopic(admin, "java-tools-lag", 2);
            ctx.produce(topic, 0, 10, "a");
            ctx.produce(topic, 1, 4, "b");
            String groupId = ctx.unique("java-tools-lag-group");
            TopicPartition p0 = new TopicPartition(topic, 0);
            TopicPartition p1 = new TopicPartition(topic, 1);
            try (KafkaConsumer<byte[], byte[]> c = memberOf(ctx, groupId, topic, 14)) {
                c.commitSync(Map.of(p0, new OffsetAndMetadata(7), p1, new OffsetAndMetadata(4)), Ctx.CALL);
                ConsumerGroupDescription d = Ctx.get(admin.describeConsumerGroups(List.of(groupId)).all()).get(groupId);
                Map<TopicPartition, OffsetAndMetadata> committed =
                        Ctx.get(admin.listConsumerGroupOffsets(groupId).partitionsToOffsetAndMetadata());
                Map<TopicPartition, OffsetSpec> latest = Map.of(p0, OffsetSpec.latest(), p1, OffsetSpec.latest());
                Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> ends = Ctx.get(admin.listOffsets(latest).all());
                long lag0 = ends.get(p0).offset() - committed.get(p0).offset();
                long lag1 = ends.get(p1).offset() - committed.get(p1).offset();
                Ctx.check(lag0 == 3 && lag1 == 0, "lag " + lag0 + "/" + lag1 + " (committed " + committed + ", ends " + ends + ")");
                Ctx.check(d.members().size() == 1 && d.members().iterator().next().assignment().topicPartitions().size() == 2,
                        "the group's members " + d.members());
                return "partition 0: committed 7, end 10, lag 3; partition 1: committed 4, end 4, lag 0; both owned by the "
                        + "group's one member, state " + d.state();
            }
        }
    }

    /**
     * What `kafka-consumer-groups --reset-offsets --to-earliest / --to-datetime --execute` does from
     * outside an empty group: look the offsets up, commit them with alterConsumerGroupOffsets; a
     * member that joins afterwards starts there.
     */
    static String resetOffsets(Ctx ctx) throws Exception {
        try (Admin admin = ctx.admin()) {
            String topic = ctx.createTopic(admin, "java-tools-reset", 1);
            TopicPartition tp = new TopicPartition(topic, 0);
            ctx.produce(topic, 0, 5, "old");
            // The datetime lies a millisecond after the first five were acknowledged (a bounded wait
            // on the clock).
            long datetime = System.currentTimeMillis() + 1;
            long deadline = System.nanoTime() + Ctx.CALL.toNanos();
            while (System.currentTimeMillis() <= datetime + 1) {
                Ctx.check(System.nanoTime() < deadline, "the clock did not advance");
                Thread.onSpinWait();
            }
            ctx.produce(topic, 0, 5, "new");
            String groupId = ctx.unique("java-tools-reset-group");
            memberOf(ctx, groupId, topic, 10).close(java.time.Duration.ofSeconds(5));
            long earliest = Ctx.get(admin.listOffsets(Map.of(tp, OffsetSpec.earliest())).all()).get(tp).offset();
            Ctx.get(admin.alterConsumerGroupOffsets(groupId, Map.of(tp, new OffsetAndMetadata(earliest))).all());
            long afterEarliest = Ctx.get(admin.listConsumerGroupOffsets(groupId).partitionsToOffsetAndMetadata()).get(tp).offset();
            Ctx.check(afterEarliest == 0, "--to-earliest committed " + afterEarliest);
            long byTime = Ctx.get(admin.listOffsets(Map.of(tp, OffsetSpec.forTimestamp(datetime))).all()).get(tp).offset();
            Ctx.check(byTime == 5, "the offset at the datetime is " + byTime + ", not 5");
            Ctx.get(admin.alterConsumerGroupOffsets(groupId, Map.of(tp, new OffsetAndMetadata(byTime))).all());
            List<KafkaConsumer<byte[], byte[]>> one = new java.util.ArrayList<>();
            one.add(ctx.consumer(ctx.consumerProps(groupId)));
            List<org.apache.kafka.clients.consumer.ConsumerRecord<byte[], byte[]>> read = new java.util.ArrayList<>();
            try {
                one.get(0).subscribe(List.of(topic));
                Ctx.pollUntil(one, "a member after the reset reads", () -> !read.isEmpty(), (i, rs) -> rs.forEach(read::add));
            } finally {
                one.get(0).close(java.time.Duration.ofSeconds(5));
            }
            Ctx.check(read.get(0).offset() == 5 && "new-0".equals(Ctx.text(read.get(0).value())),
                    "after --to-datetime a member started at " + read.get(0).offset());
            return "--to-earliest committed 0; --to-datetime committed 5; a member joining afterwards started at offset 5";
        }
    }

    /** DeleteRecords is not served: the client must say so at once, never hang. */
    static String deleteRecords(Ctx ctx) throws Exception {
        try (Admin admin = ctx.admin()) {
            String topic = ctx.createTopic(admin, "java-admin-delrec", 1);
            ctx.produce(topic, 0, 6, "v");
            TopicPartition tp = new TopicPartition(topic, 0);
            long started = System.nanoTime();
            Throwable t = Ctx.refused("deleteRecords", () -> Ctx.get(admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(3))).all()));
            long ms = (System.nanoTime() - started) / 1_000_000;
            Ctx.check(t instanceof org.apache.kafka.common.errors.UnsupportedVersionException,
                    "deleteRecords failed with " + Ctx.describe(t) + ", not UnsupportedVersionException");
            long earliest = Ctx.get(admin.listOffsets(Map.of(tp, OffsetSpec.earliest())).all()).get(tp).offset();
            Ctx.check(earliest == 0, "after the refused deleteRecords the earliest offset is " + earliest);
            return "refused in " + ms + " ms: " + Ctx.describe(t) + "; nothing deleted";
        }
    }
}
