package kafkaiggy.compat;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;

/** The producer: defaults, compression, headers, null keys and values, partitions, in-flight requests, transactions. */
final class ProducerCases {
    private ProducerCases() {}

    static void register() {
        JavaCompat.add("producer_defaults_idempotent_acks_all", true,
                List.of("PID-ALLOC-1", "DELIVERY-3", "PRODUCE-ACKS-1", "DELIVERY-ORDER-1"), ProducerCases::defaults);
        for (String codec : List.of("gzip", "snappy", "lz4", "zstd")) {
            JavaCompat.add("producer_compression_" + codec, codec.equals("lz4"), List.of("BATCH-COMPRESSION-1", "BATCH-DECODE-1"),
                    ctx -> compression(ctx, codec));
        }
        JavaCompat.add("producer_headers", false, List.of("MAP-HEADER-1"), ProducerCases::headers);
        JavaCompat.add("producer_null_keys_and_values", true, List.of("MAP-KEY-1", "MAP-VALUE-1"), ProducerCases::nulls);
        JavaCompat.add("producer_several_partitions", false, List.of("MAP-PARTITION-1", "PRODUCE-RESOLVE-1"),
                ProducerCases::severalPartitions);
        JavaCompat.add("producer_max_in_flight_5", false, List.of("DELIVERY-ORDER-1", "PRODUCER-SEQ-1"),
                ProducerCases::maxInFlight);
        JavaCompat.add("producer_defaults_through_lost_answers_store_each_record_once", "lossy_plain", true,
                List.of("DELIVERY-3", "PRODUCER-DUP-1"), ProducerCases::lostAnswers);
        JavaCompat.add("producer_transactional_refused", true, List.of("PID-TXN-1", "GROUP-TXN-COORDINATOR-1"),
                ProducerCases::transactional);
    }

    /** The client's defaults (idempotence on, acks=all) produce, and the records read back in order. */
    static String defaults(Ctx ctx) throws Exception {
        Properties props = ctx.producerProps();
        ProducerConfig config = new ProducerConfig(props);
        Ctx.check(config.getBoolean("enable.idempotence"), "the client's default enable.idempotence is not true");
        Ctx.check(config.getString("acks").equals("-1") || config.getString("acks").equals("all"),
                "the client's default acks is " + config.getString("acks"));
        String topic = ctx.createTopic("java-defaults", 1);
        List<RecordMetadata> acks = ctx.produce(topic, 0, 100, "v");
        for (int i = 0; i < acks.size(); i++) {
            Ctx.check(acks.get(i).offset() == i, "record " + i + " acknowledged at offset " + acks.get(i).offset());
        }
        List<ConsumerRecord<byte[], byte[]>> read = ctx.readAll(topic, 1, 100);
        for (int i = 0; i < 100; i++) {
            Ctx.check(("v-" + i).equals(Ctx.text(read.get(i).value())), "record " + i + " read back as "
                    + Ctx.text(read.get(i).value()));
        }
        return "enable.idempotence=true acks=" + config.getString("acks") + "; 100 records acknowledged at 0..99 and read back in order";
    }

    /**
     * The default producer (idempotence on, acks=all) through a proxy that loses the answers to
     * four Produce requests and closes those connections: the producer retries what it did not
     * hear back about, and every record is stored once.
     */
    static String lostAnswers(Ctx ctx) throws Exception {
        String topic = ctx.createTopic("java-lost-answers", 1);
        Properties props = ctx.producerProps();
        // Small batches: many Produce requests, so the proxy's chosen ones fall inside the run.
        props.put("batch.size", "512");
        int n = 3000;
        List<ProducerRecord<byte[], byte[]>> records = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            records.add(new ProducerRecord<>(topic, 0, null, Ctx.bytes("r-" + i)));
        }
        List<RecordMetadata> acks;
        try (KafkaProducer<byte[], byte[]> producer = ctx.producer(props)) {
            Ctx.check(new ProducerConfig(props).getBoolean("enable.idempotence"),
                    "the client's default enable.idempotence is not true");
            acks = Ctx.sendAll(producer, records);
        }
        java.util.Set<Long> offsets = new java.util.HashSet<>();
        for (RecordMetadata m : acks) {
            offsets.add(m.offset());
        }
        Ctx.check(offsets.size() == n, n + " records acknowledged at " + offsets.size() + " distinct offsets");
        List<ConsumerRecord<byte[], byte[]>> read = ctx.readAll(topic, 1, n);
        Map<String, Integer> copies = new HashMap<>();
        for (ConsumerRecord<byte[], byte[]> r : read) {
            copies.merge(Ctx.text(r.value()), 1, Integer::sum);
        }
        long end;
        try (org.apache.kafka.clients.consumer.KafkaConsumer<byte[], byte[]> consumer = ctx.consumer(ctx.consumerProps(null))) {
            end = consumer.endOffsets(List.of(new TopicPartition(topic, 0))).get(new TopicPartition(topic, 0));
        }
        Ctx.check(end == n && copies.size() == n && copies.values().stream().allMatch(c -> c == 1),
                "the partition ends at " + end + " and holds " + copies.size() + " distinct records of " + n
                        + " sent once each");
        return n + " records acknowledged once each and stored once (partition end " + end + ")";
    }

    static String compression(Ctx ctx, String codec) throws Exception {
        String topic = ctx.createTopic("java-" + codec, 1);
        Properties props = ctx.producerProps();
        props.put("compression.type", codec);
        props.put("linger.ms", "50");
        int n = 500;
        List<ProducerRecord<byte[], byte[]>> records = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            // Repetitive values so that every codec really compresses.
            records.add(new ProducerRecord<>(topic, 0, Ctx.bytes("key-" + i), Ctx.bytes(("value-" + i + "-").repeat(20))));
        }
        try (KafkaProducer<byte[], byte[]> producer = ctx.producer(props)) {
            Ctx.sendAll(producer, records);
        }
        List<ConsumerRecord<byte[], byte[]>> read = ctx.readAll(topic, 1, n);
        for (int i = 0; i < n; i++) {
            ConsumerRecord<byte[], byte[]> r = read.get(i);
            Ctx.check(r.offset() == i && ("key-" + i).equals(Ctx.text(r.key()))
                    && Arrays.equals(records.get(i).value(), r.value()), "record " + i + " read back differs");
        }
        return n + " " + codec + "-compressed records read back intact";
    }

    static String headers(Ctx ctx) throws Exception {
        String topic = ctx.createTopic("java-headers", 1);
        List<ProducerRecord<byte[], byte[]>> records = new ArrayList<>();
        for (int i = 0; i < 10; i++) {
            List<Header> headers = new ArrayList<>();
            headers.add(new RecordHeader("trace-id", Ctx.bytes("t" + i)));
            headers.add(new RecordHeader("a-binary", new byte[] {0, (byte) 0xff, (byte) i}));
            headers.add(new RecordHeader("empty", new byte[0]));
            records.add(new ProducerRecord<>(topic, 0, null, Ctx.bytes("k" + i), Ctx.bytes("v" + i), headers));
        }
        try (KafkaProducer<byte[], byte[]> producer = ctx.producer(ctx.producerProps())) {
            Ctx.sendAll(producer, records);
        }
        List<ConsumerRecord<byte[], byte[]>> read = ctx.readAll(topic, 1, 10);
        for (int i = 0; i < 10; i++) {
            Map<String, byte[]> got = new HashMap<>();
            for (Header h : read.get(i).headers()) {
                Ctx.check(got.put(h.key(), h.value()) == null, "header " + h.key() + " read twice");
            }
            Ctx.check(got.size() == 3, "record " + i + " has headers " + got.keySet());
            Ctx.check(Arrays.equals(got.get("trace-id"), Ctx.bytes("t" + i)), "trace-id of record " + i);
            Ctx.check(Arrays.equals(got.get("a-binary"), new byte[] {0, (byte) 0xff, (byte) i}), "a-binary of record " + i);
            Ctx.check(got.get("empty") != null && got.get("empty").length == 0, "empty header of record " + i);
        }
        return "10 records with 3 headers each (text, binary, empty) read back by name (order not kept: MAP-HEADER-1)";
    }

    static String nulls(Ctx ctx) throws Exception {
        String topic = ctx.createTopic("java-nulls", 1);
        byte[] longKey = Ctx.bytes("K".repeat(300));
        byte[][][] cases = {
            {null, Ctx.bytes("null key")},
            {Ctx.bytes("null value"), null},
            {null, null},
            {new byte[0], new byte[0]},
            {longKey, Ctx.bytes("a 300-byte key")},
        };
        List<ProducerRecord<byte[], byte[]>> records = new ArrayList<>();
        for (byte[][] c : cases) {
            records.add(new ProducerRecord<>(topic, 0, c[0], c[1]));
        }
        try (KafkaProducer<byte[], byte[]> producer = ctx.producer(ctx.producerProps())) {
            Ctx.sendAll(producer, records);
        }
        List<ConsumerRecord<byte[], byte[]>> read = ctx.readAll(topic, 1, cases.length);
        for (int i = 0; i < cases.length; i++) {
            ConsumerRecord<byte[], byte[]> r = read.get(i);
            Ctx.check(Arrays.equals(cases[i][0], r.key()) && (cases[i][0] == null) == (r.key() == null),
                    "record " + i + ": key " + Arrays.toString(cases[i][0]) + " read back as " + Arrays.toString(r.key()));
            Ctx.check(Arrays.equals(cases[i][1], r.value()) && (cases[i][1] == null) == (r.value() == null),
                    "record " + i + ": value read back as " + Arrays.toString(r.value()));
        }
        return "null key, null value, both null, both empty and a 300-byte key read back as sent";
    }

    static String severalPartitions(Ctx ctx) throws Exception {
        int partitions = 4;
        String topic = ctx.createTopic("java-partitions", partitions);
        List<ProducerRecord<byte[], byte[]>> records = new ArrayList<>();
        for (int i = 0; i < 200; i++) {
            // Half to a named partition, half by key through the default partitioner.
            Integer partition = i % 2 == 0 ? Integer.valueOf(i % partitions) : null;
            records.add(new ProducerRecord<>(topic, partition, Ctx.bytes("key-" + i), Ctx.bytes("value-" + i)));
        }
        List<RecordMetadata> acks;
        try (KafkaProducer<byte[], byte[]> producer = ctx.producer(ctx.producerProps())) {
            acks = Ctx.sendAll(producer, records);
        }
        Map<TopicPartition, Integer> perPartition = new HashMap<>();
        Map<String, Integer> partitionOf = new HashMap<>();
        for (int i = 0; i < acks.size(); i++) {
            RecordMetadata m = acks.get(i);
            if (records.get(i).partition() != null) {
                Ctx.check(m.partition() == records.get(i).partition(), "record " + i + " sent to partition "
                        + records.get(i).partition() + " acknowledged on " + m.partition());
            }
            perPartition.merge(new TopicPartition(topic, m.partition()), 1, Integer::sum);
            partitionOf.put("value-" + i, m.partition());
        }
        Ctx.check(perPartition.size() == partitions, "records landed on partitions " + perPartition.keySet());
        List<ConsumerRecord<byte[], byte[]>> read = ctx.readAll(topic, partitions, 200);
        for (ConsumerRecord<byte[], byte[]> r : read) {
            Integer expected = partitionOf.get(Ctx.text(r.value()));
            Ctx.check(expected != null && expected == r.partition(), Ctx.text(r.value()) + " read from partition "
                    + r.partition() + ", acknowledged on " + expected);
        }
        return "200 records (named and keyed partitions) over " + partitions + " partitions read back where acknowledged";
    }

    static String maxInFlight(Ctx ctx) throws Exception {
        String topic = ctx.createTopic("java-inflight", 2);
        Properties props = ctx.producerProps();
        props.put("max.in.flight.requests.per.connection", "5");
        props.put("batch.size", "1024");
        props.put("linger.ms", "0");
        int n = 3000;
        List<ProducerRecord<byte[], byte[]>> records = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            records.add(new ProducerRecord<>(topic, i % 2, null, Ctx.bytes(String.format("%06d-%s", i, "x".repeat(100)))));
        }
        try (KafkaProducer<byte[], byte[]> producer = ctx.producer(props)) {
            Ctx.sendAll(producer, records);
        }
        List<ConsumerRecord<byte[], byte[]>> read = ctx.readAll(topic, 2, n);
        int[] last = {-1, -1};
        for (ConsumerRecord<byte[], byte[]> r : read) {
            int i = Integer.parseInt(Ctx.text(r.value()).substring(0, 6));
            Ctx.check(i % 2 == r.partition() && i > last[r.partition()], "record " + i + " out of order on partition " + r.partition());
            last[r.partition()] = i;
        }
        return n + " records in small batches with 5 requests in flight, read back in send order per partition";
    }

    static String transactional(Ctx ctx) throws Exception {
        Properties props = ctx.producerProps();
        props.put("transactional.id", ctx.unique("java-txn"));
        KafkaProducer<byte[], byte[]> producer = ctx.producer(props);
        try {
            Throwable t = Ctx.refused("initTransactions", producer::initTransactions);
            return "initTransactions refused: " + Ctx.describe(t);
        } finally {
            producer.close(java.time.Duration.ofSeconds(5));
        }
    }
}
