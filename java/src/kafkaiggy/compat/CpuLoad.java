package kafkaiggy.compat;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The Java client's load for the CPU bench (conformance/benches/cpu.rs): the official client with
 * its own defaults (producer: acks=all, idempotence on, linger.ms=5, batch.size=16384; consumer:
 * fetch.min.bytes=1, max.partition.fetch.bytes=1 MiB), so the bench can count what the gateway
 * spends on the requests that client really sends.
 *
 * <pre>
 *   --phase produce|consume --bootstrap H:P --topic T --records N --size BYTES [--from OFFSET]
 * </pre>
 *
 * Protocol with the bench, one line each on stdout: after the client is connected (produce: a
 * first record acknowledged; consume: the partition assigned) it prints {@code ready OFFSET} and
 * waits for a line on stdin, so the bench's CPU snapshot leaves out the JVM's start; then it does
 * the phase and prints {@code done N}. Produce writes N records of SIZE bytes to partition 0,
 * unkeyed; consume reads N records from partition 0 starting at OFFSET and checks each one's size.
 * Every wait is bounded; any failure exits 1 with the cause on stderr.
 */
public final class CpuLoad {
    private static final Duration PHASE_LIMIT = Duration.ofSeconds(300);

    public static void main(String[] args) throws Exception {
        Map<String, String> opts = new HashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) {
            if (!args[i].startsWith("--")) {
                throw new IllegalArgumentException("unexpected argument " + args[i]);
            }
            opts.put(args[i].substring(2), args[i + 1]);
        }
        String phase = required(opts, "phase");
        String bootstrap = required(opts, "bootstrap");
        String topic = required(opts, "topic");
        long records = Long.parseLong(required(opts, "records"));
        int size = Integer.parseInt(required(opts, "size"));
        BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        switch (phase) {
            case "produce":
                produce(bootstrap, topic, records, size, stdin);
                break;
            case "consume":
                consume(bootstrap, topic, records, size, Long.parseLong(required(opts, "from")), stdin);
                break;
            default:
                throw new IllegalArgumentException("--phase is produce or consume, not " + phase);
        }
    }

    private static String required(Map<String, String> opts, String name) {
        String value = opts.get(name);
        if (value == null) {
            throw new IllegalArgumentException("--" + name + " is required");
        }
        return value;
    }

    private static void awaitGo(BufferedReader stdin, long offset) throws Exception {
        System.out.println("ready " + offset);
        System.out.flush();
        if (stdin.readLine() == null) {
            throw new IllegalStateException("the bench closed stdin before the phase");
        }
    }

    private static void produce(String bootstrap, String topic, long records, int size, BufferedReader stdin)
            throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        byte[] value = new byte[size];
        Arrays.fill(value, (byte) 'x');
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            long first = producer.send(new ProducerRecord<>(topic, 0, null, value)).get(30, TimeUnit.SECONDS).offset();
            awaitGo(stdin, first);
            AtomicLong acknowledged = new AtomicLong();
            AtomicReference<Exception> failure = new AtomicReference<>();
            for (long i = 0; i < records && failure.get() == null; i++) {
                producer.send(new ProducerRecord<>(topic, 0, null, value), (metadata, e) -> {
                    if (e != null) {
                        failure.compareAndSet(null, e);
                    } else {
                        acknowledged.incrementAndGet();
                    }
                });
            }
            producer.flush();
            if (failure.get() != null) {
                throw failure.get();
            }
            if (acknowledged.get() != records) {
                throw new IllegalStateException(acknowledged.get() + " of " + records + " records acknowledged");
            }
            System.out.println("done " + acknowledged.get());
        }
    }

    private static void consume(String bootstrap, String topic, long records, int size, long from, BufferedReader stdin)
            throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
            TopicPartition partition = new TopicPartition(topic, 0);
            consumer.assign(List.of(partition));
            consumer.seek(partition, from);
            awaitGo(stdin, from);
            long deadline = System.nanoTime() + PHASE_LIMIT.toNanos();
            long seen = 0;
            while (seen < records) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofSeconds(1))) {
                    if (r.value() == null || r.value().length != size) {
                        throw new IllegalStateException("a record of another size at offset " + r.offset());
                    }
                    seen++;
                }
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("read " + seen + " of " + records + " records in " + PHASE_LIMIT);
                }
            }
            System.out.println("done " + seen);
        }
    }
}
