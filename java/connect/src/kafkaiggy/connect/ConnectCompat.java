package kafkaiggy.connect;

import kafkaiggy.compat.Json;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * The Kafka Connect cases (docs/compat.md, "Kafka Connect"): Kafka Connect 4.3's distributed herder
 * ({@link ConnectWorker}, one JVM per worker) running FileStream and Debezium connectors against a
 * gateway. Run by the Rust driver (conformance/src/bin/compat_connect.rs), one case per JVM.
 *
 * <pre>
 *   --list                                  one JSON line per case: name, quick, needs, rules
 *   --case NAME --bootstrap H:P --work DIR  one JSON line with the case's result
 *   --pg-port P                             PostgreSQL on 127.0.0.1:P (user postgres), for the CDC case
 * </pre>
 *
 * Every wait is bounded; nothing sleeps to synchronise except the paced writer of input lines,
 * whose pace is the load, not a wait for anything.
 */
public final class ConnectCompat {
    private static final ObjectMapper JSON = new ObjectMapper();
    /** The bound of one wait for something several calls or a rebalance away. */
    static final Duration WAIT = Duration.ofSeconds(90);

    interface Body {
        String run(ConnectCompat c) throws Exception;
    }

    static final class Skip extends Exception {
        Skip(String why) {
            super(why);
        }
    }

    record Case(String name, boolean quick, String needs, List<String> rules, Body body) { }

    static final List<Case> CASES = List.of(
            new Case("filestream_pipeline", true, "", List.of("CONNECT-INTERNAL-1", "CONNECT-GROUP-1", "TOPIC-COMPACT-1",
                    "DESCRIBECONFIGS-2", "LISTOFFSETS-LATEST-1"), ConnectCompat::pipeline),
            new Case("two_workers_one_sigkilled", false, "", List.of("CONNECT-GROUP-1", "GROUP-JOIN-1", "GROUP-SYNC-1",
                    "GROUP-TIMEOUT-1", "DELIVERY-2"), ConnectCompat::twoWorkersOneKilled),
            new Case("worker_restart_resumes_offsets", false, "", List.of("CONNECT-INTERNAL-1", "TOPIC-COMPACT-1",
                    "GROUP-COMMIT-1", "GROUP-LEAVE-1"), ConnectCompat::restartResumes),
            new Case("debezium_postgres_cdc", false, "postgres", List.of("TOPIC-COMPACT-1", "MAP-KEY-1", "MAP-VALUE-1",
                    "CONNECT-INTERNAL-1"), ConnectCompat::debeziumPostgres));

    final String bootstrap;
    final Path work;
    final Map<String, String> opts;
    final String unique;
    /** Extra fields of the result line (the native check of the CDC case). */
    final Map<String, Object> extra = new LinkedHashMap<>();

    ConnectCompat(String bootstrap, Path work, Map<String, String> opts) {
        this.bootstrap = bootstrap;
        this.work = work;
        this.opts = opts;
        this.unique = "kc" + Long.toHexString(System.nanoTime() & 0xffffffffL) + ProcessHandle.current().pid();
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> opts = new HashMap<>();
        boolean list = false;
        for (int i = 0; i < args.length; i++) {
            if (args[i].equals("--list")) {
                list = true;
            } else if (args[i].startsWith("--") && i + 1 < args.length) {
                opts.put(args[i].substring(2), args[++i]);
            }
        }
        if (list) {
            for (Case c : CASES) {
                Map<String, Object> line = new LinkedHashMap<>();
                line.put("case", c.name());
                line.put("quick", c.quick());
                line.put("needs", c.needs());
                line.put("rules", c.rules());
                System.out.println(Json.object(line));
            }
            System.exit(0);
        }
        Case found = CASES.stream().filter(c -> c.name().equals(opts.get("case"))).findFirst().orElse(null);
        if (found == null || opts.get("bootstrap") == null || opts.get("work") == null) {
            System.err.println("usage: --list | --case NAME --bootstrap H:P --work DIR [--pg-port P]");
            System.exit(64);
        }
        Path work = Path.of(opts.get("work"));
        Files.createDirectories(work);
        Workers.writeLogConfig(work);
        ConnectCompat c = new ConnectCompat(opts.get("bootstrap"), work, opts);
        long started = System.nanoTime();
        String status;
        String detail;
        int code;
        try {
            detail = found.body().run(c);
            status = "passed";
            code = 0;
        } catch (Skip s) {
            status = "skipped";
            detail = s.getMessage();
            code = 2;
        } catch (Throwable t) {
            status = "failed";
            detail = describe(t);
            code = 1;
            t.printStackTrace();
        }
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("case", found.name());
        line.put("status", status);
        line.put("ms", (System.nanoTime() - started) / 1_000_000);
        line.put("rules", found.rules());
        line.put("detail", detail == null ? "" : detail);
        line.putAll(c.extra);
        System.out.println(Json.object(line));
        System.out.flush();
        System.exit(code);
    }

    // ---- the cases ----

    /** Case 1: one worker; FileStream source -> topic -> FileStream sink; every line once, in order. */
    static String pipeline(ConnectCompat c) throws Exception {
        int lines = 500;
        String topic = c.createTopic("lines", 1);
        Path in = c.work.resolve("input.txt");
        Path out = c.work.resolve("output.txt");
        writeLines(in, 0, lines);
        Workers workers = new Workers(c.work);
        try {
            Workers.Proc w = workers.start("worker-1", c.workerProps("worker-1"),
                    List.of(c.fileSource(in, topic), c.fileSink(out, topic)));
            w.await("start", WAIT, e -> e.path("event").asText().equals("started"));
            List<String> got = awaitLines(out, lines, WAIT, w);
            checkEveryLineOnceInOrder(got, lines);
            String internal = c.internalTopicPolicies();
            w.stop();
            return lines + " of " + lines + " lines in the sink once each, in order; internal topics " + internal;
        } finally {
            workers.close();
        }
    }

    /**
     * Case 2: two workers share the connectors and tasks; the one running the source task is
     * SIGKILLed mid-stream; its units move to the survivor and every line arrives (duplicates
     * counted: at least once, as Connect promises without exactly-once source support).
     */
    static String twoWorkersOneKilled(ConnectCompat c) throws Exception {
        int lines = 3000;
        String topic = c.createTopic("lines", 1);
        Path in = c.work.resolve("input.txt");
        Path out = c.work.resolve("output.txt");
        Files.writeString(in, "");
        Workers workers = new Workers(c.work);
        try {
            Properties source = c.fileSource(in, topic);
            Properties sink = c.fileSink(out, topic);
            String sourceTask = source.getProperty("name") + "-0";
            String sinkTask = sink.getProperty("name") + "-0";
            Workers.Proc a = workers.start("worker-a", c.workerProps("worker-a"), List.of(source, sink));
            a.await("both tasks running", WAIT, e -> e.path("event").asText().equals("assignment")
                    && e.path("tasks").size() == 2);
            Workers.Proc b = workers.start("worker-b", c.workerProps("worker-b"), List.of());
            // Incremental cooperative rebalancing: worker-a gives up some units, worker-b gets them.
            b.await("a share of the work", WAIT, e -> e.path("event").asText().equals("assignment")
                    && (e.path("tasks").size() + e.path("connectors").size()) > 0);
            long deadline = System.nanoTime() + WAIT.toNanos();
            while (!(a.assigned("tasks").size() + a.assigned("connectors").size() > 0
                    && b.assigned("tasks").size() + b.assigned("connectors").size() > 0
                    && (a.runs(sourceTask) || b.runs(sourceTask)) && (a.runs(sinkTask) || b.runs(sinkTask)))) {
                check(System.nanoTime() < deadline, "the two workers never shared the work: a " + a.assigned("connectors")
                        + a.assigned("tasks") + ", b " + b.assigned("connectors") + b.assigned("tasks"));
                Thread.sleep(100);
            }
            String before = "a " + a.assigned("connectors") + a.assigned("tasks") + ", b " + b.assigned("connectors")
                    + b.assigned("tasks");
            Workers.Proc victim = a.runs(sourceTask) ? a : b;
            Workers.Proc survivor = victim == a ? b : a;
            List<String> moved = new ArrayList<>(victim.assigned("connectors"));
            moved.addAll(victim.assigned("tasks"));

            // Lines are appended at a steady pace (500 a second) while the worker dies.
            Thread writer = new Thread(() -> {
                try {
                    for (int i = 0; i < lines; i += 50) {
                        writeLines(in, i, Math.min(lines, i + 50));
                        Thread.sleep(100);
                    }
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            }, "writer");
            writer.start();
            awaitLines(out, 1200, WAIT, survivor);
            // The source's file position committed before the kill: the survivor must resume at or
            // after it (it may resume later, from a flush between this read and the kill).
            long committedBefore = positionOf(c.sourcePosition(c.unique + "-offsets"));
            int atKill = Files.readAllLines(out).size();
            victim.kill();
            for (String unit : moved) {
                survivor.await(unit + " on the survivor", WAIT, e -> e.path("event").asText().equals("assignment")
                        && (contains(e.path("tasks"), unit) || contains(e.path("connectors"), unit)));
            }
            writer.join(TimeUnit.SECONDS.toMillis(60));
            List<String> got = awaitDistinct(out, lines, Duration.ofSeconds(120), survivor);
            int duplicates = got.size() - lines;
            // The topic holds the dead task's lines 0..cut-1, then the survivor's from `resumed` on:
            // the resumed position is a committed one, no earlier than the one read before the kill.
            List<String> inTopic = c.readValues(topic, lines);
            int cut = 1;
            while (cut < inTopic.size() && inTopic.get(cut).equals(line(cut))) {
                cut++;
            }
            check(cut < inTopic.size() || duplicates == 0, "the topic never restarts yet the sink has duplicates");
            int resumed = cut < inTopic.size() ? Integer.parseInt(inTopic.get(cut).substring(5)) : cut;
            List<String> expectedTopic = new ArrayList<>();
            for (int i = 0; i < cut; i++) {
                expectedTopic.add(line(i));
            }
            for (int i = resumed; i < lines; i++) {
                expectedTopic.add(line(i));
            }
            check(inTopic.equals(expectedTopic), "the topic is not lines 0.." + (cut - 1) + " then " + resumed + ".."
                    + (lines - 1) + " (" + inTopic.size() + " records)");
            check((long) resumed * LINE_BYTES >= committedBefore, "the survivor resumed at line " + resumed
                    + ", before the position " + committedBefore + " committed before the kill");
            boolean sinkMoved = moved.stream().anyMatch(u -> u.startsWith(sink.getProperty("name")));
            if (!sinkMoved) {
                // Only the source task moved: every duplicate in the sink is one of the re-read lines.
                check(duplicates == cut - resumed, duplicates + " duplicates in the sink, but the source re-read "
                        + (cut - resumed) + " lines");
            }
            survivor.stop();
            return "before the kill: " + before + "; " + victim.name + " SIGKILLed with " + atKill
                    + " lines in the sink (source position committed " + committedBefore + " bytes = line "
                    + committedBefore / LINE_BYTES + "); " + moved + " moved to " + survivor.name + "; the source resumed at line "
                    + resumed + " after the dead task had produced " + cut + "; all " + lines + " lines arrived, "
                    + duplicates + " delivered twice (at least once" + (sinkMoved ? ", the sink task moved too" : "") + ")";
        } finally {
            workers.close();
        }
    }

    /**
     * Case 3: a worker stopped and started again resumes its source offsets (the file position in
     * the offsets topic) and its sink commits (the sink's consumer group): no line is read again.
     */
    static String restartResumes(ConnectCompat c) throws Exception {
        int half = 400;
        String topic = c.createTopic("lines", 1);
        Path in = c.work.resolve("input.txt");
        Path out = c.work.resolve("output.txt");
        writeLines(in, 0, half);
        Workers workers = new Workers(c.work);
        try {
            Properties source = c.fileSource(in, topic);
            Properties sink = c.fileSink(out, topic);
            Properties worker = c.workerProps("worker-1");
            Workers.Proc first = workers.start("worker-1-first", worker, List.of(source, sink));
            awaitLines(out, half, WAIT, first);
            first.stop();
            // What the stopped worker left: the sink group's commit and the source's file position.
            String group = "connect-" + sink.getProperty("name");
            long committed = c.committed(group, topic);
            String position = c.sourcePosition(worker.getProperty("offset.storage.topic"));
            check(committed == half, "the sink group " + group + " committed " + committed + ", expected " + half);
            writeLines(in, half, 2 * half);
            // Started again with no connector given: they come back from the config topic.
            Workers.Proc second = workers.start("worker-1-second", worker, List.of());
            List<String> got = awaitLines(out, 2 * half, WAIT, second);
            checkEveryLineOnceInOrder(got, 2 * half);
            long inTopic = c.endOffset(topic);
            check(inTopic == 2 * half, "the topic holds " + inTopic + " records, expected " + 2 * half
                    + " (the source task read lines again)");
            second.stop();
            return "stopped after " + half + " lines (sink group committed " + committed + ", source position "
                    + position + "); restarted without connectors given, they came back from the config topic; "
                    + 2 * half + " lines in the sink once each and " + inTopic + " records in the topic (nothing re-read)";
        } finally {
            workers.close();
        }
    }

    /**
     * Case 4: Debezium's Postgres connector streams inserts, updates and deletes of a table into a
     * compacted topic; a Kafka consumer reads them back here, and the driver reads the same records
     * through the Iggy SDK (the {@code native} field of the result line).
     */
    static String debeziumPostgres(ConnectCompat c) throws Exception {
        String port = c.opts.get("pg-port");
        if (port == null) {
            throw new Skip(c.opts.getOrDefault("pg-skip", "no PostgreSQL given (--pg-port)"));
        }
        String jdbc = "jdbc:postgresql://127.0.0.1:" + port + "/postgres";
        String table = "customers_" + c.unique;
        try (Connection db = DriverManager.getConnection(jdbc, "postgres", "postgres"); Statement sql = db.createStatement()) {
            sql.execute("create table " + table + " (id int primary key, name text not null)");
            sql.execute("alter table " + table + " replica identity full");
        }
        Properties connector = new Properties();
        connector.setProperty("name", c.unique + "-pg");
        connector.setProperty("connector.class", "io.debezium.connector.postgresql.PostgresConnector");
        connector.setProperty("tasks.max", "1");
        connector.setProperty("database.hostname", "127.0.0.1");
        connector.setProperty("database.port", port);
        connector.setProperty("database.user", "postgres");
        connector.setProperty("database.password", "postgres");
        connector.setProperty("database.dbname", "postgres");
        connector.setProperty("topic.prefix", c.unique);
        connector.setProperty("plugin.name", "pgoutput");
        connector.setProperty("slot.name", "slot_" + c.unique);
        connector.setProperty("publication.name", "pub_" + c.unique);
        connector.setProperty("publication.autocreate.mode", "filtered");
        connector.setProperty("table.include.list", "public." + table);
        connector.setProperty("snapshot.mode", "no_data");
        connector.setProperty("key.converter", "org.apache.kafka.connect.json.JsonConverter");
        connector.setProperty("key.converter.schemas.enable", "false");
        connector.setProperty("value.converter", "org.apache.kafka.connect.json.JsonConverter");
        connector.setProperty("value.converter.schemas.enable", "false");
        // Connect creates the change topic (CreateTopics) as a compacted one, tombstones and all.
        connector.setProperty("topic.creation.default.replication.factor", "-1");
        connector.setProperty("topic.creation.default.partitions", "1");
        connector.setProperty("topic.creation.default.cleanup.policy", "compact");
        String topic = c.unique + ".public." + table;
        Workers workers = new Workers(c.work);
        try {
            Workers.Proc w = workers.start("worker-1", c.workerProps("worker-1"), List.of(connector));
            w.await("the connector's task", WAIT, e -> e.path("event").asText().equals("assignment")
                    && e.path("tasks").size() == 1);
            // Streaming has begun once the connector's replication slot is active.
            try (Connection db = DriverManager.getConnection(jdbc, "postgres", "postgres"); Statement sql = db.createStatement()) {
                long deadline = System.nanoTime() + WAIT.toNanos();
                while (true) {
                    try (ResultSet rs = sql.executeQuery("select active from pg_replication_slots where slot_name = 'slot_"
                            + c.unique + "'")) {
                        if (rs.next() && rs.getBoolean(1)) {
                            break;
                        }
                    }
                    check(System.nanoTime() < deadline, "the replication slot never became active; log " + w.log);
                    Thread.sleep(200);
                }
                for (int id = 1; id <= 10; id++) {
                    sql.execute("insert into " + table + " values (" + id + ", 'customer-" + id + "')");
                }
                for (int id = 1; id <= 5; id++) {
                    sql.execute("update " + table + " set name = 'renamed-" + id + "' where id = " + id);
                }
                sql.execute("delete from " + table + " where id = 9");
                sql.execute("delete from " + table + " where id = 10");
            }
            List<String> expected = new ArrayList<>();
            for (int i = 0; i < 10; i++) {
                expected.add("c");
            }
            for (int i = 0; i < 5; i++) {
                expected.add("u");
            }
            expected.addAll(List.of("d", "tombstone", "d", "tombstone"));
            List<String> ops = new ArrayList<>();
            List<String> keys = new ArrayList<>();
            try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(c.consumerProps(null))) {
                TopicPartition tp = new TopicPartition(topic, 0);
                long deadline = System.nanoTime() + WAIT.toNanos();
                while (true) {
                    // The topic appears when the connector's first record is produced.
                    try {
                        consumer.assign(List.of(tp));
                        consumer.seekToBeginning(List.of(tp));
                        break;
                    } catch (Exception e) {
                        check(System.nanoTime() < deadline, "topic " + topic + " never appeared: " + describe(e));
                        Thread.sleep(200);
                    }
                }
                while (ops.size() < expected.size()) {
                    check(System.nanoTime() < deadline, "read " + ops + " of " + expected.size() + " change events; log " + w.log);
                    for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                        ops.add(r.value() == null ? "tombstone" : JSON.readTree(r.value()).path("op").asText());
                        keys.add(r.key() == null ? "null" : new String(r.key(), StandardCharsets.UTF_8));
                    }
                }
            }
            check(ops.equals(expected), "change events " + ops + ", expected " + expected);
            check(keys.get(0).equals("{\"id\":1}"), "the first key is " + keys.get(0));
            String policy = c.policyOf(topic);
            check(policy.equals("compact"), "the change topic's cleanup.policy is " + policy);
            // The driver reads the same records natively and compares.
            Map<String, Object> nativeCheck = new LinkedHashMap<>();
            nativeCheck.put("topic", topic);
            nativeCheck.put("ops", ops);
            nativeCheck.put("keys", keys);
            c.extra.put("native", nativeCheck);
            w.stop();
            return "Debezium streamed 10 inserts, 5 updates and 2 deletes of public." + table + " to " + topic
                    + " (cleanup.policy " + policy + "); a Kafka consumer read " + ops.size()
                    + " records: c x10, u x5, then d and a tombstone twice";
        } finally {
            workers.close();
        }
    }

    // ---- settings ----

    Properties common() {
        Properties p = new Properties();
        p.setProperty("bootstrap.servers", bootstrap);
        p.setProperty("request.timeout.ms", "15000");
        return p;
    }

    Properties consumerProps(String group) {
        Properties p = common();
        p.setProperty("key.deserializer", ByteArrayDeserializer.class.getName());
        p.setProperty("value.deserializer", ByteArrayDeserializer.class.getName());
        p.setProperty("auto.offset.reset", "earliest");
        p.setProperty("enable.auto.commit", "false");
        if (group != null) {
            p.setProperty("group.id", group);
        }
        return p;
    }

    /** A distributed worker of this case's Connect cluster (one group, three internal topics). */
    Properties workerProps(String name) throws Exception {
        Properties p = common();
        p.setProperty("group.id", unique + "-cluster");
        p.setProperty("config.storage.topic", unique + "-configs");
        p.setProperty("offset.storage.topic", unique + "-offsets");
        p.setProperty("status.storage.topic", unique + "-status");
        // -1: the broker's default (KIP-464); the gateway ignores replication (TOPIC-REPLICATION-1).
        p.setProperty("config.storage.replication.factor", "-1");
        p.setProperty("offset.storage.replication.factor", "-1");
        p.setProperty("status.storage.replication.factor", "-1");
        p.setProperty("offset.storage.partitions", "3");
        p.setProperty("status.storage.partitions", "2");
        p.setProperty("key.converter", "org.apache.kafka.connect.storage.StringConverter");
        p.setProperty("value.converter", "org.apache.kafka.connect.storage.StringConverter");
        p.setProperty("offset.flush.interval.ms", "1000");
        // A departed worker's units wait this long for it to come back (KIP-415) before they move.
        p.setProperty("scheduled.rebalance.max.delay.ms", "3000");
        p.setProperty("session.timeout.ms", "10000");
        p.setProperty("heartbeat.interval.ms", "1000");
        p.setProperty("task.shutdown.graceful.timeout.ms", "5000");
        p.setProperty("plugin.discovery", "service_load");
        p.setProperty("kafkaiggy.rest.port", Integer.toString(Workers.freePort()));
        return p;
    }

    Properties fileSource(Path file, String topic) {
        Properties p = new Properties();
        p.setProperty("name", unique + "-source");
        p.setProperty("connector.class", "org.apache.kafka.connect.file.FileStreamSourceConnector");
        p.setProperty("tasks.max", "1");
        p.setProperty("file", file.toString());
        p.setProperty("topic", topic);
        return p;
    }

    Properties fileSink(Path file, String topic) {
        Properties p = new Properties();
        p.setProperty("name", unique + "-sink");
        p.setProperty("connector.class", "org.apache.kafka.connect.file.FileStreamSinkConnector");
        p.setProperty("tasks.max", "1");
        p.setProperty("file", file.toString());
        p.setProperty("topics", topic);
        return p;
    }

    // ---- helpers ----

    Admin admin() {
        Properties p = common();
        p.setProperty("default.api.timeout.ms", "20000");
        return Admin.create(p);
    }

    String createTopic(String prefix, int partitions) throws Exception {
        String topic = unique + "-" + prefix;
        try (Admin admin = admin()) {
            admin.createTopics(List.of(new NewTopic(topic, partitions, (short) -1))).all().get(20, TimeUnit.SECONDS);
        }
        return topic;
    }

    String policyOf(String topic) throws Exception {
        try (Admin admin = admin()) {
            ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            Config config = admin.describeConfigs(List.of(res)).all().get(20, TimeUnit.SECONDS).get(res);
            return config.get("cleanup.policy").value();
        }
    }

    /** The cleanup policy of the three internal topics, as Connect verified them at start. */
    String internalTopicPolicies() throws Exception {
        List<String> out = new ArrayList<>();
        for (String t : List.of("configs", "offsets", "status")) {
            String topic = unique + "-" + t;
            String policy = policyOf(topic);
            check(policy.equals("compact"), topic + " has cleanup.policy " + policy);
            out.add(t + "=" + policy);
        }
        return String.join(", ", out);
    }

    long committed(String group, String topic) throws Exception {
        try (Admin admin = admin()) {
            OffsetAndMetadata o = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata()
                    .get(20, TimeUnit.SECONDS).get(new TopicPartition(topic, 0));
            return o == null ? -1 : o.offset();
        }
    }

    long endOffset(String topic) throws Exception {
        try (Admin admin = admin()) {
            TopicPartition tp = new TopicPartition(topic, 0);
            return admin.listOffsets(Map.of(tp, OffsetSpec.latest())).all().get(20, TimeUnit.SECONDS).get(tp).offset();
        }
    }

    /** The last source offset the FileStream source stored in the offsets topic (its file position). */
    String sourcePosition(String offsetsTopic) throws Exception {
        String last = "none";
        try (Admin admin = admin(); KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(consumerProps(null))) {
            List<TopicPartition> parts = new ArrayList<>();
            int n = admin.describeTopics(List.of(offsetsTopic)).allTopicNames().get(20, TimeUnit.SECONDS)
                    .get(offsetsTopic).partitions().size();
            for (int i = 0; i < n; i++) {
                parts.add(new TopicPartition(offsetsTopic, i));
            }
            Map<TopicPartition, Long> ends = consumer.endOffsets(parts);
            consumer.assign(parts);
            consumer.seekToBeginning(parts);
            long deadline = System.nanoTime() + WAIT.toNanos();
            while (parts.stream().anyMatch(tp -> consumer.position(tp) < ends.get(tp))) {
                check(System.nanoTime() < deadline, "the offsets topic was not read to its end");
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                    if (r.value() != null) {
                        last = new String(r.value(), StandardCharsets.UTF_8);
                    }
                }
            }
        }
        return last;
    }

    /** The FileStream source's stored offset, {@code {"position":N}}, as N (0 when none). */
    static long positionOf(String offset) throws Exception {
        return offset.equals("none") ? 0 : JSON.readTree(offset).path("position").asLong();
    }

    /** The values of a one-partition topic, read from its start until {@code atLeast} are read. */
    List<String> readValues(String topic, int atLeast) throws Exception {
        List<String> out = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(consumerProps(null))) {
            TopicPartition tp = new TopicPartition(topic, 0);
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            long end = consumer.endOffsets(List.of(tp)).get(tp);
            long deadline = System.nanoTime() + WAIT.toNanos();
            while (consumer.position(tp) < end || out.size() < atLeast) {
                check(System.nanoTime() < deadline, "read " + out.size() + " records of " + topic + " (end " + end + ")");
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                    out.add(new String(r.value(), StandardCharsets.UTF_8));
                }
                if (out.size() >= atLeast) {
                    end = consumer.endOffsets(List.of(tp)).get(tp);
                }
            }
        }
        return out;
    }

    static void writeLines(Path file, int from, int to) throws Exception {
        StringBuilder b = new StringBuilder();
        for (int i = from; i < to; i++) {
            b.append(line(i)).append('\n');
        }
        Files.writeString(file, b.toString(), StandardOpenOption.CREATE, StandardOpenOption.APPEND);
    }

    /** The bytes of one input line: {@code line-NNNNNN} and its newline. */
    static final int LINE_BYTES = 12;

    static String line(int i) {
        return String.format("line-%06d", i);
    }

    /** The sink file's lines once it holds at least {@code n}; fails after {@code limit}. */
    static List<String> awaitLines(Path file, int n, Duration limit, Workers.Proc w) throws Exception {
        long deadline = System.nanoTime() + limit.toNanos();
        while (true) {
            List<String> got = Files.exists(file) ? Files.readAllLines(file) : List.of();
            if (got.size() >= n) {
                return got;
            }
            check(System.nanoTime() < deadline, "the sink holds " + got.size() + " of " + n + " lines after " + limit
                    + "; log " + w.log);
            Thread.sleep(100);
        }
    }

    /** The sink file's lines once every one of the {@code n} lines is there at least once. */
    static List<String> awaitDistinct(Path file, int n, Duration limit, Workers.Proc w) throws Exception {
        long deadline = System.nanoTime() + limit.toNanos();
        while (true) {
            List<String> got = Files.exists(file) ? Files.readAllLines(file) : List.of();
            java.util.Set<String> distinct = new java.util.HashSet<>(got);
            if (distinct.size() >= n) {
                for (int i = 0; i < n; i++) {
                    check(distinct.contains(line(i)), "line " + i + " is missing from the sink");
                }
                check(distinct.size() == n, "the sink holds lines that were never written: " + distinct.size());
                return got;
            }
            check(System.nanoTime() < deadline, "the sink holds " + distinct.size() + " distinct of " + n
                    + " lines after " + limit + "; log " + w.log);
            Thread.sleep(100);
        }
    }

    static void checkEveryLineOnceInOrder(List<String> got, int n) {
        check(got.size() == n, "the sink holds " + got.size() + " lines, expected " + n);
        for (int i = 0; i < n; i++) {
            check(got.get(i).equals(line(i)), "sink line " + i + " is " + got.get(i) + ", expected " + line(i));
        }
    }

    static boolean contains(JsonNode array, String value) {
        for (JsonNode n : array) {
            if (n.asText().equals(value)) {
                return true;
            }
        }
        return false;
    }

    static void check(boolean ok, String what) {
        if (!ok) {
            throw new AssertionError(what);
        }
    }

    static String describe(Throwable t) {
        StringBuilder out = new StringBuilder();
        for (Throwable c = t; c != null; c = c.getCause()) {
            if (out.length() > 0) {
                out.append(" <- ");
            }
            out.append(c.getClass().getSimpleName());
            if (c.getMessage() != null) {
                out.append(": ").append(c.getMessage().replace('\n', ' '));
            }
            if (c.getCause() == c) {
                break;
            }
        }
        return out.toString();
    }
}
