package kafkaiggy.compat;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/** What a case runs against, the clients' settings, and the helpers the cases share. */
final class Ctx {
    /** The bound of every single client call. */
    static final Duration CALL = Duration.ofSeconds(20);
    /** The bound of a wait for something that takes several calls (a group to settle, records to arrive). */
    static final Duration WAIT = Duration.ofSeconds(45);

    final String bootstrap;
    final String securityProtocol;
    final String saslUsername;
    final String saslPassword;
    final String sslCa;
    private static final AtomicLong UNIQUE = new AtomicLong();

    Ctx(String bootstrap, String securityProtocol, String saslUsername, String saslPassword, String sslCa) {
        this.bootstrap = bootstrap;
        this.securityProtocol = securityProtocol;
        this.saslUsername = saslUsername;
        this.saslPassword = saslPassword;
        this.sslCa = sslCa;
    }

    /** A name no other case of any run uses: a real Iggy server keeps topics and groups between runs. */
    String unique(String prefix) {
        return prefix + "-" + ProcessHandle.current().pid() + "-" + Long.toHexString(System.nanoTime()) + "-"
                + UNIQUE.incrementAndGet();
    }

    Properties common() {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("client.id", "kafka-iggy-java-compat");
        p.put("request.timeout.ms", "10000");
        p.put("security.protocol", securityProtocol);
        if (securityProtocol.startsWith("SASL")) {
            p.put("sasl.mechanism", "PLAIN");
            p.put("sasl.jaas.config", "org.apache.kafka.common.security.plain.PlainLoginModule required username=\""
                    + saslUsername + "\" password=\"" + saslPassword + "\";");
        }
        if (sslCa != null) {
            p.put("ssl.truststore.type", "PEM");
            p.put("ssl.truststore.location", sslCa);
        }
        return p;
    }

    Properties producerProps() {
        Properties p = common();
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        p.put("max.block.ms", "15000");
        p.put("delivery.timeout.ms", "30000");
        p.put("linger.ms", "5");
        return p;
    }

    Properties consumerProps(String group) {
        Properties p = common();
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        if (group != null) {
            p.put("group.id", group);
        }
        p.put("auto.offset.reset", "earliest");
        p.put("enable.auto.commit", "false");
        p.put("default.api.timeout.ms", "15000");
        p.put("session.timeout.ms", "10000");
        p.put("heartbeat.interval.ms", "1000");
        p.put("max.poll.interval.ms", "60000");
        return p;
    }

    Admin admin() {
        Properties p = common();
        p.put("default.api.timeout.ms", "20000");
        return Admin.create(p);
    }

    KafkaProducer<byte[], byte[]> producer(Properties p) {
        return new KafkaProducer<>(p);
    }

    KafkaConsumer<byte[], byte[]> consumer(Properties p) {
        return new KafkaConsumer<>(p);
    }

    static <T> T get(KafkaFuture<T> f) throws Exception {
        return f.get(CALL.toMillis(), TimeUnit.MILLISECONDS);
    }

    static <T> T get(Future<T> f) throws Exception {
        return f.get(CALL.toMillis(), TimeUnit.MILLISECONDS);
    }

    /** Creates a topic with a unique name through the Admin API (CreateTopics), bounded by {@link #CALL}. */
    String createTopic(Admin admin, String prefix, int partitions) throws Exception {
        String topic = unique(prefix);
        get(admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 1))).all());
        return topic;
    }

    String createTopic(String prefix, int partitions) throws Exception {
        try (Admin admin = admin()) {
            return createTopic(admin, prefix, partitions);
        }
    }

    static byte[] bytes(String s) {
        return s == null ? null : s.getBytes(StandardCharsets.UTF_8);
    }

    static String text(byte[] b) {
        return b == null ? null : new String(b, StandardCharsets.UTF_8);
    }

    /** Sends every record and waits for each acknowledgement; returns the metadata in send order. */
    static List<RecordMetadata> sendAll(KafkaProducer<byte[], byte[]> producer, List<ProducerRecord<byte[], byte[]>> records)
            throws Exception {
        List<Future<RecordMetadata>> futures = new ArrayList<>();
        for (ProducerRecord<byte[], byte[]> r : records) {
            futures.add(producer.send(r));
        }
        producer.flush();
        List<RecordMetadata> out = new ArrayList<>();
        for (Future<RecordMetadata> f : futures) {
            out.add(get(f));
        }
        return out;
    }

    /** Produces {@code n} records {@code prefix-i} to one partition with the default producer; returns their offsets. */
    List<RecordMetadata> produce(String topic, int partition, int n, String prefix) throws Exception {
        try (KafkaProducer<byte[], byte[]> producer = producer(producerProps())) {
            List<ProducerRecord<byte[], byte[]>> records = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                records.add(new ProducerRecord<>(topic, partition, bytes("k" + i), bytes(prefix + "-" + i)));
            }
            return sendAll(producer, records);
        }
    }

    /** Reads {@code expected} records from the partitions given, from the beginning, without a group. */
    List<ConsumerRecord<byte[], byte[]>> readAll(Properties props, Collection<TopicPartition> partitions, int expected)
            throws Exception {
        try (KafkaConsumer<byte[], byte[]> consumer = consumer(props)) {
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            List<ConsumerRecord<byte[], byte[]>> out = new ArrayList<>();
            long deadline = System.nanoTime() + WAIT.toNanos();
            while (out.size() < expected) {
                if (System.nanoTime() > deadline) {
                    throw new AssertionError("read " + out.size() + " of " + expected + " records within " + WAIT);
                }
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                    out.add(r);
                }
            }
            return out;
        }
    }

    List<ConsumerRecord<byte[], byte[]>> readAll(String topic, int partitions, int expected) throws Exception {
        return readAll(consumerProps(null), partitionsOf(topic, partitions), expected);
    }

    static List<TopicPartition> partitionsOf(String topic, int partitions) {
        List<TopicPartition> out = new ArrayList<>();
        for (int p = 0; p < partitions; p++) {
            out.add(new TopicPartition(topic, p));
        }
        return out;
    }

    /** Polls every consumer in turn until {@code done} holds; fails after {@link #WAIT}. */
    static void pollUntil(List<KafkaConsumer<byte[], byte[]>> consumers, String what, Condition done,
            RecordSink sink) throws Exception {
        long deadline = System.nanoTime() + WAIT.toNanos();
        while (!done.holds()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("not within " + WAIT + ": " + what);
            }
            for (int i = 0; i < consumers.size(); i++) {
                ConsumerRecords<byte[], byte[]> records = consumers.get(i).poll(Duration.ofMillis(100));
                if (sink != null) {
                    sink.accept(i, records);
                }
            }
        }
    }

    interface Condition {
        boolean holds() throws Exception;
    }

    interface RecordSink {
        void accept(int consumer, ConsumerRecords<byte[], byte[]> records) throws Exception;
    }

    /** Whether the consumers' assignments are disjoint and together cover {@code partitions} partitions of {@code topic}. */
    static boolean covers(List<KafkaConsumer<byte[], byte[]>> consumers, String topic, int partitions, boolean everyMember) {
        Map<TopicPartition, Integer> owners = new HashMap<>();
        for (int i = 0; i < consumers.size(); i++) {
            if (everyMember && consumers.get(i).assignment().isEmpty()) {
                return false;
            }
            for (TopicPartition tp : consumers.get(i).assignment()) {
                if (owners.put(tp, i) != null) {
                    return false;
                }
            }
        }
        return owners.keySet().equals(new java.util.HashSet<>(partitionsOf(topic, partitions)));
    }

    static String assignments(List<KafkaConsumer<byte[], byte[]>> consumers) {
        List<String> out = new ArrayList<>();
        for (KafkaConsumer<byte[], byte[]> c : consumers) {
            List<Integer> ps = new ArrayList<>();
            for (TopicPartition tp : c.assignment()) {
                ps.add(tp.partition());
            }
            Collections.sort(ps);
            out.add(ps.toString());
        }
        return String.join(" ", out);
    }

    static void check(boolean ok, String what) {
        if (!ok) {
            throw new AssertionError(what);
        }
    }

    /** The exception's class and message, and its causes', on one line. */
    static String describe(Throwable t) {
        if (t instanceof ExecutionException && t.getCause() != null) {
            t = t.getCause();
        }
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

    /**
     * Runs {@code call}, which must fail: returns the failure (unwrapped from an
     * ExecutionException). Fails itself if the call succeeds, or fails only by running out of time
     * (no answer: a hang the client turned into a timeout).
     */
    static Throwable refused(String what, Callable call) throws Exception {
        try {
            call.run();
        } catch (ExecutionException e) {
            return timeoutIsNoAnswer(what, e.getCause() == null ? e : e.getCause());
        } catch (Exception e) {
            return timeoutIsNoAnswer(what, e);
        }
        throw new AssertionError(what + " succeeded; a refusal was expected");
    }

    private static Throwable timeoutIsNoAnswer(String what, Throwable t) {
        if (t instanceof java.util.concurrent.TimeoutException || t instanceof org.apache.kafka.common.errors.TimeoutException) {
            throw new AssertionError(what + " got no answer, only a timeout: " + describe(t));
        }
        return t;
    }

    interface Callable {
        void run() throws Exception;
    }
}
