package kafkaiggy.compat;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.TopicPartition;

/**
 * Kafka 4's consumer group protocol (KIP-848, `group.protocol=consumer`) with the official
 * client: members that split a topic through the coordinator's assignor, commits checked against
 * member epochs, an incremental takeover when a member leaves, and the Admin's view of such a
 * group (ConsumerGroupDescribe). The assignment is the coordinator's; the client sends no
 * JoinGroup or SyncGroup.
 */
final class ConsumerProtocolCases {
    private ConsumerProtocolCases() {}

    static void register() {
        JavaCompat.add("consumer_protocol_two_members_split_and_a_third_resumes_at_commits", true,
                List.of("GROUP-CONSUMER-HEARTBEAT-1", "GROUP-CONSUMER-ASSIGNOR-1", "GROUP-CONSUMER-TOPIC-ID-1",
                        "GROUP-CONSUMER-COMMIT-1", "GROUP-CONSUMER-LEAVE-1"),
                ConsumerProtocolCases::splitAndResume);
        JavaCompat.add("consumer_protocol_member_leaves_and_the_survivor_takes_over", false,
                List.of("GROUP-CONSUMER-REVOKE-1", "GROUP-CONSUMER-LEAVE-1", "GROUP-CONSUMER-COMMIT-1", "DELIVERY-2"),
                ConsumerProtocolCases::survivorTakesOver);
        JavaCompat.add("admin_describe_and_list_consumer_protocol_group", false,
                List.of("GROUP-CONSUMER-DESCRIBE-1", "GROUP-CONSUMER-ASSIGNOR-1"),
                ConsumerProtocolCases::describeAndList);
    }

    /**
     * A member of a consumer-protocol group. The client refuses the classic group's own settings
     * (session and heartbeat timing, client-side assignors) with this protocol: the coordinator
     * chooses them.
     */
    static Properties props(Ctx ctx, String group) {
        Properties p = ctx.consumerProps(group);
        p.remove("session.timeout.ms");
        p.remove("heartbeat.interval.ms");
        p.put("group.protocol", "consumer");
        return p;
    }

    /**
     * Two consumer-protocol members split a 4-partition topic (the coordinator's `uniform`
     * assignor: two partitions each) and read every record exactly as it was written, committing
     * after each poll; after both close (leaving the group), a third member of the same group
     * starts at their commits and reads nothing below them.
     */
    static String splitAndResume(Ctx ctx) throws Exception {
        int partitions = 4;
        int perPartition = 10;
        String topic = ctx.createTopic("java-kip848", partitions);
        for (int p = 0; p < partitions; p++) {
            ctx.produce(topic, p, perPartition, "p" + p);
        }
        String groupId = ctx.unique("java-kip848-group");
        Properties props = props(ctx, groupId);
        List<KafkaConsumer<byte[], byte[]>> members = new ArrayList<>();
        Map<String, String> read = new ConcurrentHashMap<>();
        AtomicInteger mismatches = new AtomicInteger();
        List<String> firstMismatch = new ArrayList<>();
        String split;
        try {
            for (int i = 0; i < 2; i++) {
                members.add(ctx.consumer(props));
                members.get(i).subscribe(List.of(topic));
            }
            Ctx.RecordSink sink = (i, rs) -> {
                for (ConsumerRecord<byte[], byte[]> r : rs) {
                    // ctx.produce writes "p<partition>-<i>" as the i-th record of the partition.
                    String expected = "p" + r.partition() + "-" + r.offset();
                    String got = Ctx.text(r.value());
                    if (!expected.equals(got)) {
                        mismatches.incrementAndGet();
                        if (firstMismatch.isEmpty()) {
                            firstMismatch.add(r.partition() + ":" + r.offset() + " holds " + got);
                        }
                    }
                    read.put(r.partition() + ":" + r.offset(), got);
                }
                if (!rs.isEmpty()) {
                    commitWhileReconciling(members.get(i));
                }
            };
            Ctx.pollUntil(members, "two members split the 4 partitions and read all " + partitions * perPartition + " records",
                    () -> Ctx.covers(members, topic, partitions, true) && read.size() == partitions * perPartition, sink);
            split = Ctx.assignments(members);
            Ctx.check(mismatches.get() == 0, mismatches.get() + " records differ from what was written, first " + firstMismatch);
            Ctx.check(split.equals("[0, 1] [2, 3]") || split.equals("[2, 3] [0, 1]") || countsAre(members, 2),
                    "uniform split " + split);
            // What each member holds now is read to the end: commit it (an epoch-checked v9 commit).
            for (KafkaConsumer<byte[], byte[]> c : members) {
                c.commitSync(Ctx.CALL);
            }
        } finally {
            for (KafkaConsumer<byte[], byte[]> c : members) {
                c.close(Duration.ofSeconds(10));
            }
        }
        // Written after the two left: the third member must start exactly at their commits.
        for (int p = 0; p < partitions; p++) {
            ctx.produce(topic, p, 5, "late" + p);
        }
        List<KafkaConsumer<byte[], byte[]>> third = new ArrayList<>();
        third.add(ctx.consumer(props));
        Map<Integer, Long> lowest = new TreeMap<>();
        int[] count = {0};
        try {
            List<TopicPartition> tps = Ctx.partitionsOf(topic, partitions);
            Map<TopicPartition, OffsetAndMetadata> committed = third.get(0).committed(new HashSet<>(tps), Ctx.CALL);
            for (TopicPartition tp : tps) {
                Ctx.check(committed.get(tp) != null && committed.get(tp).offset() == perPartition,
                        "committed offset of " + tp + " is " + committed.get(tp) + ", not " + perPartition);
            }
            third.get(0).subscribe(List.of(topic));
            Ctx.pollUntil(third, "the third member read the 20 records written after the commits",
                    () -> count[0] >= partitions * 5, (i, rs) -> {
                        for (ConsumerRecord<byte[], byte[]> r : rs) {
                            lowest.merge(r.partition(), r.offset(), Math::min);
                            count[0]++;
                        }
                    });
            for (int p = 0; p < partitions; p++) {
                Ctx.check(lowest.get(p) != null && lowest.get(p) == perPartition,
                        "the third member started partition " + p + " at " + lowest.get(p) + ", not at the commit " + perPartition);
            }
            Ctx.check(count[0] == partitions * 5, "the third member read " + count[0] + " records, not " + partitions * 5);
        } finally {
            third.get(0).close(Duration.ofSeconds(10));
        }
        return "two members split 4 partitions as " + split + ", read all " + partitions * perPartition
                + " records as written and committed 10 each (" + STALE.get() + " commits after a poll answered STALE_MEMBER_EPOCH, retried);"
                + " a third member started every partition at 10 and read only the 20 newer records";
    }

    private static boolean countsAre(List<KafkaConsumer<byte[], byte[]>> members, int each) {
        return members.stream().allMatch(c -> c.assignment().size() == each);
    }

    /** Records, for one member, every partition it was asked to revoke or told it lost. */
    static final class Recorder implements ConsumerRebalanceListener {
        final Set<TopicPartition> revoked = ConcurrentHashMap.newKeySet();
        final Set<TopicPartition> lost = ConcurrentHashMap.newKeySet();
        final Set<TopicPartition> assigned = ConcurrentHashMap.newKeySet();

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            revoked.addAll(partitions);
        }

        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            assigned.addAll(partitions);
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> partitions) {
            lost.addAll(partitions);
        }
    }

    /**
     * Two members share a 4-partition topic while a producer writes; one leaves and the survivor
     * takes over its partitions. The rebalance is incremental: the survivor is never asked to
     * revoke a partition it keeps (its listener records every revocation), loses none, and every
     * acknowledged record is read at least once.
     */
    static String survivorTakesOver(Ctx ctx) throws Exception {
        int partitions = 4;
        String topic = ctx.createTopic("java-kip848-leave", partitions);
        String groupId = ctx.unique("java-kip848-leave-group");
        Properties props = props(ctx, groupId);
        Map<String, Integer> consumed = new ConcurrentHashMap<>();
        List<KafkaConsumer<byte[], byte[]>> members = new ArrayList<>();
        List<Recorder> recorders = new ArrayList<>();
        Ctx.RecordSink sink = (i, rs) -> {
            for (ConsumerRecord<byte[], byte[]> r : rs) {
                consumed.merge(r.partition() + ":" + r.offset(), 1, Integer::sum);
            }
            if (!rs.isEmpty()) {
                commitWhileReconciling(members.get(i));
            }
        };
        boolean leaverClosed = false;
        try (ConsumerCases.LoadProducer load = new ConsumerCases.LoadProducer(ctx, topic)) {
            for (int i = 0; i < 2; i++) {
                Recorder r = new Recorder();
                recorders.add(r);
                members.add(ctx.consumer(props));
                members.get(i).subscribe(List.of(topic), r);
            }
            Ctx.pollUntil(members, "two members split the partitions", () -> Ctx.covers(members, topic, partitions, true), sink);
            String split = Ctx.assignments(members);
            Set<TopicPartition> kept = new HashSet<>(members.get(0).assignment());
            Set<TopicPartition> leaving = new HashSet<>(members.get(1).assignment());
            Recorder survivor = recorders.get(0);
            // What the survivor gave up while the second member joined is not this case's subject.
            survivor.revoked.clear();
            survivor.assigned.clear();
            members.get(1).commitSync(Ctx.CALL);
            members.get(1).close(Duration.ofSeconds(10));
            leaverClosed = true;
            List<KafkaConsumer<byte[], byte[]>> alone = List.of(members.get(0));
            // The assignment is reconciled in the client's background thread; the listener runs in
            // a later poll of this one, so both are waited for.
            Ctx.pollUntil(alone, "the survivor owns all 4 partitions and its listener was told",
                    () -> Ctx.covers(alone, topic, partitions, true) && survivor.assigned.containsAll(leaving),
                    (i, rs) -> sink.accept(0, rs));
            Ctx.check(survivor.revoked.isEmpty(), "the survivor was asked to revoke " + survivor.revoked
                    + " while taking over " + leaving + " (it kept " + kept + ")");
            Ctx.check(survivor.lost.isEmpty(), "the survivor lost " + survivor.lost);
            Ctx.check(survivor.assigned.equals(leaving), "the survivor was newly assigned " + survivor.assigned
                    + ", not the leaver's " + leaving);
            Set<String> acked = load.finish();
            Ctx.pollUntil(alone, "every acknowledged record read", () -> consumed.keySet().containsAll(acked),
                    (i, rs) -> sink.accept(0, rs));
            long twice = consumed.values().stream().filter(v -> v > 1).count();
            return "split " + split + "; the leaver's " + sorted(leaving) + " went to the survivor with no revocation of its "
                    + sorted(kept) + "; " + acked.size() + " acknowledged records all read, " + twice + " twice; "
                    + STALE.get() + " commits after a poll answered STALE_MEMBER_EPOCH and " + DEFERRED.get()
                    + " refused by the client mid-reconciliation (both left to the next poll)";
        } finally {
            for (int i = 0; i < members.size(); i++) {
                if (i != 1 || !leaverClosed) {
                    members.get(i).close(Duration.ofSeconds(10));
                }
            }
        }
    }

    private static List<Integer> sorted(Set<TopicPartition> tps) {
        List<Integer> out = new ArrayList<>();
        for (TopicPartition tp : tps) {
            out.add(tp.partition());
        }
        java.util.Collections.sort(out);
        return out;
    }

    static final AtomicInteger DEFERRED = new AtomicInteger();

    /**
     * commitSync of what was read, after a poll. While the group moves to a new epoch, a commit
     * the client sent under its previous member epoch, before the heartbeat answer that bumped it
     * arrived, is answered STALE_MEMBER_EPOCH (GROUP-CONSUMER-COMMIT-1: the epoch must be the
     * member's current one); the client reports that as CommitFailedException. Such a commit is
     * left to the next poll, so those records may be read again (at least once), never lost, and
     * is counted. Kafka 4.3's coordinator accepts a commit whose epoch is at least the
     * partitions' assignment epoch (KIP-1251); the gateway does not yet (docs/compat.md).
     */
    static void commitWhileReconciling(KafkaConsumer<byte[], byte[]> c) {
        try {
            c.commitSync(Ctx.CALL);
        } catch (org.apache.kafka.common.errors.RebalanceInProgressException e) {
            DEFERRED.incrementAndGet();
        } catch (org.apache.kafka.clients.consumer.CommitFailedException e) {
            if (e.getMessage() == null || !e.getMessage().contains("stale member epoch")) {
                throw e;
            }
            STALE.incrementAndGet();
        }
    }

    static final AtomicInteger STALE = new AtomicInteger();

    /**
     * The Admin's view of a consumer-protocol group: describeConsumerGroups (ConsumerGroupDescribe
     * on a 4.x client) reports its type, state, assignor and each member's assignment, which
     * together cover the topic; listConsumerGroups, and listGroups on a client that has it,
     * show it.
     */
    static String describeAndList(Ctx ctx) throws Exception {
        int partitions = 4;
        try (Admin admin = ctx.admin()) {
            String topic = ctx.createTopic(admin, "java-kip848-admin", partitions);
            String groupId = ctx.unique("java-kip848-admin-group");
            Properties props = props(ctx, groupId);
            List<KafkaConsumer<byte[], byte[]>> members = new ArrayList<>();
            try {
                for (int i = 0; i < 2; i++) {
                    members.add(ctx.consumer(props));
                    members.get(i).subscribe(List.of(topic));
                }
                Ctx.pollUntil(members, "two members split the partitions", () -> Ctx.covers(members, topic, partitions, true), null);
                // The coordinator answers the Admin from its own view; it may still be a heartbeat
                // behind the clients', so the description is asked again until it is settled.
                ConsumerGroupDescription[] d = {null};
                Ctx.pollUntil(members, "describeConsumerGroups reports a Stable group of 2 members covering the topic", () -> {
                    d[0] = Ctx.get(admin.describeConsumerGroups(List.of(groupId)).all()).get(groupId);
                    return String.valueOf(d[0].state()).equalsIgnoreCase("stable") && d[0].members().size() == 2
                            && describedCover(d[0], topic, partitions);
                }, null);
                Ctx.check(d[0].type() == GroupType.CONSUMER, "type " + d[0].type() + ", not CONSUMER");
                Ctx.check("uniform".equals(d[0].partitionAssignor()), "assignor " + d[0].partitionAssignor());
                Set<String> ids = new HashSet<>();
                for (MemberDescription m : d[0].members()) {
                    ids.add(m.consumerId());
                    Ctx.check(m.targetAssignment().isPresent()
                            && m.targetAssignment().get().topicPartitions().equals(m.assignment().topicPartitions()),
                            "member " + m.consumerId() + " target " + m.targetAssignment() + " vs assignment " + m.assignment());
                }
                Collection<ConsumerGroupListing> listed = Ctx.get(admin.listConsumerGroups().all());
                ConsumerGroupListing mine = listed.stream().filter(g -> g.groupId().equals(groupId)).findFirst().orElse(null);
                Ctx.check(mine != null, "listConsumerGroups does not show " + groupId);
                Ctx.check(mine.type().isEmpty() || mine.type().get() == GroupType.CONSUMER, "listConsumerGroups type " + mine.type());
                String listGroups = listGroupsType(admin, groupId);
                return "described " + d[0].state() + ", type " + d[0].type() + ", assignor " + d[0].partitionAssignor()
                        + ", 2 members holding " + assignmentsOf(d[0]) + "; listConsumerGroups type "
                        + mine.type().map(String::valueOf).orElse("(none)") + "; listGroups " + listGroups;
            } finally {
                for (KafkaConsumer<byte[], byte[]> c : members) {
                    c.close(Duration.ofSeconds(10));
                }
            }
        }
    }

    private static boolean describedCover(ConsumerGroupDescription d, String topic, int partitions) {
        Set<TopicPartition> all = new HashSet<>();
        int total = 0;
        for (MemberDescription m : d.members()) {
            all.addAll(m.assignment().topicPartitions());
            total += m.assignment().topicPartitions().size();
        }
        return total == partitions && all.equals(new HashSet<>(Ctx.partitionsOf(topic, partitions)));
    }

    private static String assignmentsOf(ConsumerGroupDescription d) {
        List<String> out = new ArrayList<>();
        for (MemberDescription m : d.members()) {
            out.add(sorted(m.assignment().topicPartitions()).toString());
        }
        java.util.Collections.sort(out);
        return String.join(" ", out);
    }

    /**
     * Admin.listGroups (kafka-clients 4.0, KIP-1043) lists groups of every type; looked up at run
     * time, as 3.9 has no such method. Returns what it says of the group, or that there is no
     * such method; fails when it does not list the group as a consumer group of protocol `consumer`.
     */
    private static String listGroupsType(Admin admin, String groupId) throws Exception {
        java.lang.reflect.Method listGroups;
        try {
            listGroups = Admin.class.getMethod("listGroups");
        } catch (NoSuchMethodException e) {
            return "not in this client";
        }
        Object result = listGroups.invoke(admin);
        Collection<?> all = (Collection<?>) Ctx.get((org.apache.kafka.common.KafkaFuture<?>) result.getClass().getMethod("all").invoke(result));
        for (Object listing : all) {
            if (groupId.equals(listing.getClass().getMethod("groupId").invoke(listing))) {
                Object type = listing.getClass().getMethod("type").invoke(listing);
                Object protocol = listing.getClass().getMethod("protocol").invoke(listing);
                // The type is ListGroups v5's GroupType field; the gateway answers up to v4, so the
                // client has none to show (docs/compat.md). The protocol type is what it has.
                Ctx.check("consumer".equals(protocol), "listGroups protocol " + protocol);
                return "type " + type + ", protocol " + protocol;
            }
        }
        throw new AssertionError("listGroups does not show " + groupId);
    }
}
