package kafkaiggy.compat;

import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Future;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;

/**
 * A verifiable producer and consumer, the project's own, in the manner of Kafka's system-test
 * tools: both emit one JSON event per line (on stderr; the driver keeps it in the case's log),
 * and the case checks that every acknowledged record was consumed exactly once by a group that
 * had settled before the first send. Run plain, under SASL PLAIN and under TLS.
 */
final class VerifiableCases {
    private VerifiableCases() {}

    static final int RECORDS = 2000;
    static final int PARTITIONS = 3;

    static void register() {
        JavaCompat.add("verifiable_producer_consumer", "plain", true, List.of("DELIVERY-2", "GROUP-COMMIT-1"),
                VerifiableCases::run);
        JavaCompat.add("verifiable_producer_consumer_sasl_plain", "sasl_plain", false,
                List.of("DELIVERY-2", "AUTH-SASL-PLAIN-1"), VerifiableCases::run);
        JavaCompat.add("verifiable_producer_consumer_tls", "tls", false, List.of("DELIVERY-2", "AUTH-TLS-1"),
                VerifiableCases::run);
    }

    static void emit(String name, Map<String, Object> fields) {
        Map<String, Object> event = new LinkedHashMap<>();
        event.put("timestamp", System.currentTimeMillis());
        event.put("name", name);
        event.putAll(fields);
        System.err.println(Json.object(event));
    }

    static String run(Ctx ctx) throws Exception {
        String topic = ctx.createTopic("java-verifiable", PARTITIONS);
        String groupId = ctx.unique("java-verifiable-group");
        List<KafkaConsumer<byte[], byte[]>> consumers = new ArrayList<>();
        Map<String, Integer> consumed = new ConcurrentHashMap<>();
        try {
            for (int i = 0; i < 2; i++) {
                KafkaConsumer<byte[], byte[]> c = ctx.consumer(ctx.consumerProps(groupId));
                c.subscribe(List.of(topic));
                consumers.add(c);
            }
            emit("startup_complete", Map.of("tool", "consumer", "group", groupId));
            Ctx.pollUntil(consumers, "the group settles", () -> Ctx.covers(consumers, topic, PARTITIONS, true), null);
            for (int i = 0; i < consumers.size(); i++) {
                emit("partitions_assigned", Map.of("consumer", i, "partitions", List.copyOf(
                        consumers.get(i).assignment().stream().map(tp -> tp.partition()).sorted().toList())));
            }
            emit("startup_complete", Map.of("tool", "producer", "topic", topic));
            List<Future<RecordMetadata>> sends = new ArrayList<>();
            try (KafkaProducer<byte[], byte[]> producer = ctx.producer(ctx.producerProps())) {
                for (int i = 0; i < RECORDS; i++) {
                    sends.add(producer.send(new ProducerRecord<>(topic, Ctx.bytes(Integer.toString(i)), Ctx.bytes("value-" + i))));
                }
                producer.flush();
            }
            List<String> acked = new ArrayList<>();
            int failed = 0;
            for (int i = 0; i < sends.size(); i++) {
                try {
                    RecordMetadata m = Ctx.get(sends.get(i));
                    acked.add(m.partition() + ":" + m.offset());
                    emit("producer_send_success", Map.of("key", Integer.toString(i), "partition", m.partition(), "offset", m.offset()));
                } catch (Exception e) {
                    failed++;
                    emit("producer_send_error", Map.of("key", Integer.toString(i), "exception", Ctx.describe(e)));
                }
            }
            emit("shutdown_complete", Map.of("tool", "producer", "acked", acked.size(), "failed", failed));
            Ctx.check(failed == 0, failed + " sends failed");
            Ctx.pollUntil(consumers, "every acknowledged record consumed", () -> consumed.keySet().containsAll(acked), (i, rs) -> {
                if (rs.isEmpty()) {
                    return;
                }
                for (ConsumerRecord<byte[], byte[]> r : rs) {
                    consumed.merge(r.partition() + ":" + r.offset(), 1, Integer::sum);
                }
                emit("records_consumed", Map.of("consumer", i, "count", rs.count()));
                consumers.get(i).commitSync(Ctx.CALL);
                emit("offsets_committed", Map.of("consumer", i, "success", true));
            });
            long twice = consumed.values().stream().filter(v -> v > 1).count();
            emit("shutdown_complete", Map.of("tool", "consumer", "consumed", consumed.size(), "duplicates", twice));
            Ctx.check(twice == 0, twice + " records consumed more than once in a settled group");
            Ctx.check(consumed.size() == acked.size(), consumed.size() + " distinct records consumed, " + acked.size() + " acknowledged");
            return RECORDS + " acknowledged over " + PARTITIONS + " partitions, each consumed exactly once by a settled two-member group ("
                    + ctx.securityProtocol + ")";
        } finally {
            for (KafkaConsumer<byte[], byte[]> c : consumers) {
                c.close(Duration.ofSeconds(5));
            }
        }
    }
}
