package kafkaiggy.compat;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.consumer.RoundRobinAssignor;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;

/** The consumer: assignors, static membership, a rebalance under load, commits, seeks and offset lookups. */
final class ConsumerCases {
    private ConsumerCases() {}

    static void register() {
        List<String> group = List.of("GROUP-JOIN-1", "GROUP-SYNC-1", "GROUP-HEARTBEAT-1", "GROUP-LEAVE-1");
        JavaCompat.add("consumer_range_assignor", true, group, ctx -> assignor(ctx, RangeAssignor.class.getName()));
        JavaCompat.add("consumer_round_robin_assignor", false, group, ctx -> assignor(ctx, RoundRobinAssignor.class.getName()));
        JavaCompat.add("consumer_cooperative_sticky_assignor", false, group,
                ctx -> assignor(ctx, CooperativeStickyAssignor.class.getName()));
        JavaCompat.add("consumer_static_membership", false, List.of("GROUP-STATIC-1", "DESCRIBEGROUPS-MEMBERS-1"),
                ConsumerCases::staticMembership);
        JavaCompat.add("consumer_three_member_rebalance_while_producing", false,
                List.of("GROUP-JOIN-1", "GROUP-SYNC-1", "GROUP-HEARTBEAT-1", "GROUP-COMMIT-1", "DELIVERY-2"),
                ConsumerCases::rebalanceWhileProducing);
        JavaCompat.add("consumer_cooperative_sticky_rolling_restart_under_load", false,
                List.of("GROUP-JOIN-1", "GROUP-SYNC-1", "GROUP-LEAVE-1", "GROUP-COMMIT-1", "DELIVERY-2"),
                ConsumerCases::rollingRestart);
        JavaCompat.add("consumer_manual_commit", true, List.of("GROUP-COMMIT-1", "CO-KEY-1", "CO-VERBATIM-1"),
                ConsumerCases::manualCommit);
        JavaCompat.add("consumer_seek", false, List.of("FETCH-RANGE-1", "LISTOFFSETS-EARLIEST-1", "LISTOFFSETS-LATEST-1"),
                ConsumerCases::seek);
        JavaCompat.add("consumer_offsets_for_times", false, List.of("LISTOFFSETS-TIMESTAMP-1", "MAP-TS-1"),
                ConsumerCases::offsetsForTimes);
        JavaCompat.add("consumer_beginning_and_end_offsets", false, List.of("LISTOFFSETS-EARLIEST-1", "LISTOFFSETS-LATEST-1"),
                ConsumerCases::endOffsets);
        JavaCompat.add("consumer_pause_resume", false, List.of("FETCH-RANGE-1"), ConsumerCases::pauseResume);
        JavaCompat.add("consumer_read_committed", false, List.of("PID-TXN-1", "LISTOFFSETS-LATEST-1"),
                ConsumerCases::readCommitted);
    }

    /** Two members with one assignor share a 4-partition topic as that assignor splits it, and read every record. */
    static String assignor(Ctx ctx, String assignor) throws Exception {
        int partitions = 4;
        String topic = ctx.createTopic("java-assign", partitions);
        for (int p = 0; p < partitions; p++) {
            ctx.produce(topic, p, 5, "p" + p);
        }
        String groupId = ctx.unique("java-assign-group");
        Properties props = ctx.consumerProps(groupId);
        props.put("partition.assignment.strategy", assignor);
        List<KafkaConsumer<byte[], byte[]>> members = new ArrayList<>();
        Set<String> seen = ConcurrentHashMap.newKeySet();
        try {
            members.add(ctx.consumer(props));
            members.get(0).subscribe(List.of(topic));
            Ctx.pollUntil(members, "the first member owns all 4 partitions", () -> Ctx.covers(members, topic, partitions, true),
                    (i, rs) -> rs.forEach(r -> seen.add(r.partition() + ":" + r.offset())));
            Set<TopicPartition> before = new HashSet<>(members.get(0).assignment());
            members.add(ctx.consumer(props));
            members.get(1).subscribe(List.of(topic));
            Ctx.pollUntil(members, "two members split the partitions", () -> Ctx.covers(members, topic, partitions, true),
                    (i, rs) -> rs.forEach(r -> seen.add(r.partition() + ":" + r.offset())));
            String split = Ctx.assignments(members);
            if (assignor.equals(RangeAssignor.class.getName())) {
                Ctx.check(split.equals("[0, 1] [2, 3]") || split.equals("[2, 3] [0, 1]"), "range split " + split);
            } else if (assignor.equals(RoundRobinAssignor.class.getName())) {
                Ctx.check(split.equals("[0, 2] [1, 3]") || split.equals("[1, 3] [0, 2]"), "round-robin split " + split);
            } else {
                Ctx.check(before.containsAll(members.get(0).assignment()) && members.get(0).assignment().size() == 2,
                        "cooperative-sticky: the first member now owns " + members.get(0).assignment());
            }
            Ctx.pollUntil(members, "every record read", () -> seen.size() == 20,
                    (i, rs) -> rs.forEach(r -> seen.add(r.partition() + ":" + r.offset())));
            return "two members split 4 partitions as " + split + " and read all 20 records";
        } finally {
            for (KafkaConsumer<byte[], byte[]> c : members) {
                c.close(Duration.ofSeconds(5));
            }
        }
    }

    /** A static member that closes and comes back with its group.instance.id gets its partitions at once. */
    static String staticMembership(Ctx ctx) throws Exception {
        String topic = ctx.createTopic("java-static", 2);
        String groupId = ctx.unique("java-static-group");
        Properties props = ctx.consumerProps(groupId);
        props.put("group.instance.id", "instance-a");
        props.put("session.timeout.ms", "30000");
        List<KafkaConsumer<byte[], byte[]>> one = new ArrayList<>();
        one.add(ctx.consumer(props));
        String firstMember;
        try (Admin admin = ctx.admin()) {
            try {
                one.get(0).subscribe(List.of(topic));
                Ctx.pollUntil(one, "the static member owns both partitions", () -> Ctx.covers(one, topic, 2, true), null);
                ConsumerGroupDescription d = Ctx.get(admin.describeConsumerGroups(List.of(groupId)).all()).get(groupId);
                Ctx.check(d.members().size() == 1, "members " + d.members());
                MemberDescription m = d.members().iterator().next();
                Ctx.check(m.groupInstanceId().isPresent() && m.groupInstanceId().get().equals("instance-a"),
                        "describeConsumerGroups shows group instance id " + m.groupInstanceId());
                firstMember = m.consumerId();
            } finally {
                // A static member leaves no group on close: the coordinator keeps its place.
                one.get(0).close(Duration.ofSeconds(5));
            }
            one.set(0, ctx.consumer(props));
            long started = System.nanoTime();
            try {
                one.get(0).subscribe(List.of(topic));
                Ctx.pollUntil(one, "the returning static member owns both partitions", () -> Ctx.covers(one, topic, 2, true), null);
                long ms = (System.nanoTime() - started) / 1_000_000;
                Ctx.check(ms < 30000, "the returning member waited " + ms + " ms, the old one's session timeout");
                ConsumerGroupDescription d = Ctx.get(admin.describeConsumerGroups(List.of(groupId)).all()).get(groupId);
                Ctx.check(d.members().size() == 1, "after the return, members " + d.members());
                MemberDescription m = d.members().iterator().next();
                Ctx.check(!m.consumerId().equals(firstMember), "the returning member kept the old member id");
                return "the returning static member got both partitions in " + ms + " ms (session timeout 30 s) under a new member id";
            } finally {
                one.get(0).close(Duration.ofSeconds(5));
            }
        }
    }

    /**
     * A producer writing in the background at a paced rate until stopped; records which (partition,
     * offset) pairs were acknowledged and the first send error.
     */
    static final class LoadProducer implements AutoCloseable {
        final Set<String> acked = ConcurrentHashMap.newKeySet();
        final AtomicReference<Throwable> error = new AtomicReference<>();
        private final AtomicBoolean stop = new AtomicBoolean();
        private final Thread thread;

        LoadProducer(Ctx ctx, String topic) {
            thread = new Thread(() -> {
                try (KafkaProducer<byte[], byte[]> producer = ctx.producer(ctx.producerProps())) {
                    int i = 0;
                    while (!stop.get()) {
                        producer.send(new ProducerRecord<>(topic, Ctx.bytes("k" + i), Ctx.bytes("v" + i)), (m, e) -> {
                            if (e == null) {
                                acked.add(m.partition() + ":" + m.offset());
                            } else {
                                error.compareAndSet(null, e);
                            }
                        });
                        i++;
                        if (i % 20 == 0) {
                            producer.flush();
                            // Pacing, not synchronisation: at most about 5,000 records a second, so
                            // that a long case does not fill the backend.
                            Thread.sleep(4);
                        }
                    }
                    producer.flush();
                } catch (Throwable t) {
                    error.compareAndSet(null, t);
                }
            }, "java-compat-producer");
            thread.start();
        }

        /** Stops the producer and waits for its last acknowledgements; fails on a send error. */
        Set<String> finish() throws Exception {
            stop.set(true);
            thread.join(Ctx.WAIT.toMillis());
            Ctx.check(!thread.isAlive(), "the producer did not stop");
            if (error.get() != null) {
                throw new AssertionError("a send failed: " + Ctx.describe(error.get()));
            }
            Ctx.check(!acked.isEmpty(), "nothing was acknowledged");
            return acked;
        }

        @Override
        public void close() throws InterruptedException {
            stop.set(true);
            thread.join(Ctx.WAIT.toMillis());
        }
    }

    /** A group member that commits what it read after every poll and whatever it loses on revocation. */
    static KafkaConsumer<byte[], byte[]> committingMember(Ctx ctx, Properties props, String topic) {
        KafkaConsumer<byte[], byte[]> c = ctx.consumer(props);
        c.subscribe(List.of(topic), new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> revoked) {
                commitUnlessRebalancing(c);
            }

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> assigned) {}
        });
        return c;
    }

    /**
     * Three members join one after another while a producer writes; each commits what it read
     * after every poll and on revocation. Every acknowledged record is read at least once.
     */
    static String rebalanceWhileProducing(Ctx ctx) throws Exception {
        int partitions = 6;
        String topic = ctx.createTopic("java-rebalance", partitions);
        String groupId = ctx.unique("java-rebalance-group");
        Map<String, Integer> consumed = new ConcurrentHashMap<>();
        List<KafkaConsumer<byte[], byte[]>> members = new ArrayList<>();
        Ctx.RecordSink sink = committingSink(members, consumed);
        try (LoadProducer load = new LoadProducer(ctx, topic)) {
            for (int n = 1; n <= 3; n++) {
                members.add(committingMember(ctx, ctx.consumerProps(groupId), topic));
                Ctx.pollUntil(members, n + " members share the partitions", () -> Ctx.covers(members, topic, partitions, true), sink);
            }
            String split = Ctx.assignments(members);
            Set<String> acked = load.finish();
            Ctx.pollUntil(members, "every acknowledged record read", () -> consumed.keySet().containsAll(acked), sink);
            long duplicates = consumed.values().stream().filter(v -> v > 1).count();
            return acked.size() + " acknowledged records all read across three joins (final split " + split + "); "
                    + duplicates + " read twice (at-least-once across rebalances)";
        } finally {
            for (KafkaConsumer<byte[], byte[]> c : members) {
                c.close(Duration.ofSeconds(5));
            }
        }
    }

    private static Ctx.RecordSink committingSink(List<KafkaConsumer<byte[], byte[]>> members, Map<String, Integer> consumed) {
        return (i, rs) -> {
            for (ConsumerRecord<byte[], byte[]> r : rs) {
                consumed.merge(r.partition() + ":" + r.offset(), 1, Integer::sum);
            }
            if (!rs.isEmpty()) {
                commitUnlessRebalancing(members.get(i));
            }
        };
    }

    /**
     * commitSync of what was read. The Java client itself refuses a commit while its member is in
     * a rebalance (RebalanceInProgressException: the cooperative protocol keeps members reading
     * through one); that commit is left to the next poll, so those records may be read again
     * (at-least-once), never lost.
     */
    static void commitUnlessRebalancing(KafkaConsumer<byte[], byte[]> c) {
        try {
            c.commitSync(Ctx.CALL);
        } catch (org.apache.kafka.common.errors.RebalanceInProgressException e) {
            DEFERRED_COMMITS.incrementAndGet();
        }
    }

    static final java.util.concurrent.atomic.AtomicInteger DEFERRED_COMMITS = new java.util.concurrent.atomic.AtomicInteger();

    /**
     * A rolling restart of a three-member cooperative-sticky group under load: each member in turn
     * leaves and a new one takes its place, the group settling between restarts. Nothing
     * acknowledged is lost; what is read twice (at-least-once allows it) is counted.
     */
    static String rollingRestart(Ctx ctx) throws Exception {
        int partitions = 6;
        String topic = ctx.createTopic("java-rolling", partitions);
        String groupId = ctx.unique("java-rolling-group");
        Properties props = ctx.consumerProps(groupId);
        props.put("partition.assignment.strategy", CooperativeStickyAssignor.class.getName());
        Map<String, Integer> consumed = new ConcurrentHashMap<>();
        List<KafkaConsumer<byte[], byte[]>> members = new ArrayList<>();
        Ctx.RecordSink sink = committingSink(members, consumed);
        try (LoadProducer load = new LoadProducer(ctx, topic)) {
            for (int n = 1; n <= 3; n++) {
                members.add(committingMember(ctx, props, topic));
                Ctx.pollUntil(members, n + " members share the partitions", () -> Ctx.covers(members, topic, partitions, true), sink);
            }
            for (int k = 0; k < 3; k++) {
                members.get(k).close(Duration.ofSeconds(10));
                members.set(k, committingMember(ctx, props, topic));
                Ctx.pollUntil(members, "member " + k + " restarted and the group settled",
                        () -> Ctx.covers(members, topic, partitions, true), sink);
            }
            String split = Ctx.assignments(members);
            Set<String> acked = load.finish();
            Ctx.pollUntil(members, "every acknowledged record read", () -> consumed.keySet().containsAll(acked), sink);
            long duplicates = consumed.values().stream().filter(v -> v > 1).count();
            return acked.size() + " acknowledged records all read through three member restarts (final split " + split + "); "
                    + duplicates + " read twice; " + DEFERRED_COMMITS.get() + " commits deferred by a rebalance";
        } finally {
            for (KafkaConsumer<byte[], byte[]> c : members) {
                c.close(Duration.ofSeconds(5));
            }
        }
    }

    /** commitSync of an explicit offset is what committed() and a later member of the group start from. */
    static String manualCommit(Ctx ctx) throws Exception {
        String topic = ctx.createTopic("java-commit", 1);
        ctx.produce(topic, 0, 10, "v");
        String groupId = ctx.unique("java-commit-group");
        TopicPartition tp = new TopicPartition(topic, 0);
        List<KafkaConsumer<byte[], byte[]>> one = new ArrayList<>();
        one.add(ctx.consumer(ctx.consumerProps(groupId)));
        List<ConsumerRecord<byte[], byte[]>> read = new ArrayList<>();
        try {
            one.get(0).subscribe(List.of(topic));
            Ctx.pollUntil(one, "10 records read", () -> read.size() >= 10, (i, rs) -> rs.forEach(read::add));
            one.get(0).commitSync(Map.of(tp, new OffsetAndMetadata(6)), Ctx.CALL);
            Map<TopicPartition, OffsetAndMetadata> committed = one.get(0).committed(Set.of(tp), Ctx.CALL);
            Ctx.check(committed.get(tp) != null && committed.get(tp).offset() == 6, "committed() answers " + committed);
        } finally {
            one.get(0).close(Duration.ofSeconds(5));
        }
        one.set(0, ctx.consumer(ctx.consumerProps(groupId)));
        List<ConsumerRecord<byte[], byte[]>> again = new ArrayList<>();
        try {
            one.get(0).subscribe(List.of(topic));
            Ctx.pollUntil(one, "the records after the commit read", () -> again.size() >= 4, (i, rs) -> rs.forEach(again::add));
            Ctx.check(again.get(0).offset() == 6, "a new member started at " + again.get(0).offset() + ", not at the commit (6)");
            return "commitSync(6) read back by committed(); a new member started at offset 6";
        } finally {
            one.get(0).close(Duration.ofSeconds(5));
        }
    }

    static String seek(Ctx ctx) throws Exception {
        String topic = ctx.createTopic("java-seek", 1);
        ctx.produce(topic, 0, 10, "v");
        TopicPartition tp = new TopicPartition(topic, 0);
        try (KafkaConsumer<byte[], byte[]> c = ctx.consumer(ctx.consumerProps(null))) {
            c.assign(List.of(tp));
            c.seek(tp, 5);
            ConsumerRecord<byte[], byte[]> first = firstRecord(c);
            Ctx.check(first.offset() == 5 && "v-5".equals(Ctx.text(first.value())), "after seek(5) read offset " + first.offset());
            c.seekToBeginning(List.of(tp));
            Ctx.check(c.position(tp, Ctx.CALL) == 0, "seekToBeginning put the position at " + c.position(tp, Ctx.CALL));
            c.seekToEnd(List.of(tp));
            Ctx.check(c.position(tp, Ctx.CALL) == 10, "seekToEnd put the position at " + c.position(tp, Ctx.CALL));
            c.seek(tp, 9);
            Ctx.check(firstRecord(c).offset() == 9, "after seek(9)");
            return "seek(5) read offset 5; seekToBeginning at 0; seekToEnd at 10; seek(9) read offset 9";
        }
    }

    private static ConsumerRecord<byte[], byte[]> firstRecord(KafkaConsumer<byte[], byte[]> c) {
        long deadline = System.nanoTime() + Ctx.WAIT.toNanos();
        while (System.nanoTime() < deadline) {
            ConsumerRecords<byte[], byte[]> rs = c.poll(Duration.ofMillis(200));
            if (!rs.isEmpty()) {
                return rs.iterator().next();
            }
        }
        throw new AssertionError("no record within " + Ctx.WAIT);
    }

    /** offsetsForTimes(T) for a T between two acknowledged batches answers the second batch's first offset. */
    static String offsetsForTimes(Ctx ctx) throws Exception {
        String topic = ctx.createTopic("java-times", 1);
        TopicPartition tp = new TopicPartition(topic, 0);
        long beforeAll = System.currentTimeMillis();
        ctx.produce(topic, 0, 5, "a");
        // The target is a millisecond after the first batch was acknowledged (a bounded wait on the
        // clock, not a sleep): every record of it was appended before the target.
        long acked = System.currentTimeMillis();
        long target = acked + 1;
        long deadline = System.nanoTime() + Ctx.CALL.toNanos();
        while (System.currentTimeMillis() <= target + 1) {
            Ctx.check(System.nanoTime() < deadline, "the clock did not advance");
            Thread.onSpinWait();
        }
        List<RecordMetadata> second = ctx.produce(topic, 0, 5, "b");
        try (KafkaConsumer<byte[], byte[]> c = ctx.consumer(ctx.consumerProps(null))) {
            Map<TopicPartition, OffsetAndTimestamp> atStart = c.offsetsForTimes(Map.of(tp, beforeAll), Ctx.CALL);
            Ctx.check(atStart.get(tp) != null && atStart.get(tp).offset() == 0, "offsetsForTimes(before all) answers " + atStart);
            Map<TopicPartition, OffsetAndTimestamp> between = c.offsetsForTimes(Map.of(tp, target), Ctx.CALL);
            Ctx.check(between.get(tp) != null && between.get(tp).offset() == second.get(0).offset(),
                    "offsetsForTimes(between the batches) answers " + between + ", expected offset " + second.get(0).offset());
            Map<TopicPartition, OffsetAndTimestamp> future = c.offsetsForTimes(Map.of(tp, System.currentTimeMillis() + 3_600_000L), Ctx.CALL);
            Ctx.check(future.get(tp) == null, "offsetsForTimes(an hour ahead) answers " + future);
            return "before all: 0; between the batches: " + between.get(tp).offset() + "; an hour ahead: none";
        }
    }

    static String endOffsets(Ctx ctx) throws Exception {
        String topic = ctx.createTopic("java-ends", 2);
        ctx.produce(topic, 0, 7, "v");
        List<TopicPartition> tps = Ctx.partitionsOf(topic, 2);
        try (KafkaConsumer<byte[], byte[]> c = ctx.consumer(ctx.consumerProps(null))) {
            Map<TopicPartition, Long> begin = c.beginningOffsets(tps, Ctx.CALL);
            Map<TopicPartition, Long> end = c.endOffsets(tps, Ctx.CALL);
            Ctx.check(begin.get(tps.get(0)) == 0 && begin.get(tps.get(1)) == 0, "beginningOffsets " + begin);
            Ctx.check(end.get(tps.get(0)) == 7 && end.get(tps.get(1)) == 0, "endOffsets " + end);
            return "beginningOffsets 0/0, endOffsets 7/0 (a written and an empty partition)";
        }
    }

    /** A paused partition yields nothing while the other one is read; resumed, it is read. */
    static String pauseResume(Ctx ctx) throws Exception {
        String topic = ctx.createTopic("java-pause", 2);
        ctx.produce(topic, 0, 5, "p0");
        ctx.produce(topic, 1, 5, "p1");
        List<TopicPartition> tps = Ctx.partitionsOf(topic, 2);
        List<KafkaConsumer<byte[], byte[]>> one = new ArrayList<>();
        one.add(ctx.consumer(ctx.consumerProps(null)));
        try {
            KafkaConsumer<byte[], byte[]> c = one.get(0);
            c.assign(tps);
            c.seekToBeginning(tps);
            c.pause(List.of(tps.get(0)));
            Map<Integer, Integer> counts = new HashMap<>();
            Ctx.RecordSink sink = (i, rs) -> rs.forEach(r -> counts.merge(r.partition(), 1, Integer::sum));
            Ctx.pollUntil(one, "the unpaused partition read", () -> counts.getOrDefault(1, 0) == 5, sink);
            // A few more polls while partition 1 is drained: partition 0 must still yield nothing.
            for (int i = 0; i < 3; i++) {
                sink.accept(0, c.poll(Duration.ofMillis(200)));
            }
            Ctx.check(counts.getOrDefault(0, 0) == 0, "the paused partition yielded " + counts.get(0) + " records");
            Ctx.check(c.paused().equals(Set.of(tps.get(0))), "paused() answers " + c.paused());
            c.resume(List.of(tps.get(0)));
            Ctx.pollUntil(one, "the resumed partition read", () -> counts.getOrDefault(0, 0) == 5, sink);
            return "nothing from the paused partition while the other was read; all 5 after resume";
        } finally {
            one.get(0).close(Duration.ofSeconds(5));
        }
    }

    /** With no transactions, read_committed reads up to the high watermark, as Kafka does. */
    static String readCommitted(Ctx ctx) throws Exception {
        String topic = ctx.createTopic("java-rc", 1);
        ctx.produce(topic, 0, 10, "v");
        Properties props = ctx.consumerProps(null);
        props.put("isolation.level", "read_committed");
        TopicPartition tp = new TopicPartition(topic, 0);
        List<ConsumerRecord<byte[], byte[]>> read = ctx.readAll(props, List.of(tp), 10);
        try (KafkaConsumer<byte[], byte[]> c = ctx.consumer(props)) {
            long end = c.endOffsets(List.of(tp), Ctx.CALL).get(tp);
            Ctx.check(end == 10, "read_committed endOffsets (the last stable offset) " + end);
        }
        Ctx.check(read.get(9).offset() == 9, "last record read at " + read.get(9).offset());
        return "read_committed read all 10 records; its end offset (LSO) is the high watermark, 10";
    }
}
