package kafkaiggy.connect;

import kafkaiggy.compat.Json;
import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import javax.crypto.Mac;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.connect.connector.policy.ConnectorClientConfigOverridePolicy;
import org.apache.kafka.connect.runtime.Worker;
import org.apache.kafka.connect.runtime.distributed.DistributedConfig;
import org.apache.kafka.connect.runtime.distributed.DistributedHerder;
import org.apache.kafka.connect.runtime.isolation.Plugins;
import org.apache.kafka.connect.runtime.rest.InternalRequestSignature;
import org.apache.kafka.connect.runtime.rest.RestClient;
import org.apache.kafka.connect.storage.KafkaConfigBackingStore;
import org.apache.kafka.connect.storage.KafkaOffsetBackingStore;
import org.apache.kafka.connect.storage.KafkaStatusBackingStore;
import org.apache.kafka.connect.util.ConnectUtils;
import org.apache.kafka.connect.util.ConnectorTaskId;
import org.apache.kafka.connect.util.FutureCallback;
import org.apache.kafka.connect.util.SharedTopicAdmin;

/**
 * One Kafka Connect distributed worker (docs/compat.md, "Kafka Connect"), built as Connect 4.3's
 * {@code ConnectDistributed.createHerder} builds it: the same backing stores on Kafka topics and the
 * same {@link DistributedHerder}, but without Connect's REST server, whose Jetty 12 security module
 * the pinned wheel lacks. The one REST call workers make of each other, a follower forwarding its
 * connector's task configs to the leader ({@code POST /connectors/NAME/tasks}, signed with the
 * session key under the {@code sessioned} protocol), is served here by the JDK's HTTP server, and
 * handed to the herder exactly as Connect's {@code InternalClusterResource} hands it.
 *
 * <pre>
 *   ConnectWorker PROPERTIES_FILE [CONNECTOR_FILE...]
 * </pre>
 * The properties are the worker's config; {@code kafkaiggy.rest.port} is the port of the internal
 * endpoint, advertised as the worker's URL. Each connector file (properties with {@code name}) is
 * put through {@code Herder.putConnectorConfig} once this worker leads. Events go to stdout, one JSON
 * line each: {@code started}, {@code assignment} (on every change of the connectors and tasks this
 * worker runs), {@code put}, {@code stopped}. Ends when stdin closes or on SIGTERM, stopping the
 * herder (which commits offsets).
 */
public final class ConnectWorker {
    private static final ObjectMapper JSON = new ObjectMapper();

    public static void main(String[] args) throws Exception {
        Map<String, String> props = load(Path.of(args[0]));
        int port = Integer.parseInt(props.remove("kafkaiggy.rest.port"));
        String workerId = props.getOrDefault("kafkaiggy.worker.id", "127.0.0.1:" + port);
        props.remove("kafkaiggy.worker.id");
        String url = "http://127.0.0.1:" + port + "/";

        Plugins plugins = new Plugins(props);
        plugins.compareAndSwapWithDelegatingLoader();
        DistributedConfig config = new DistributedConfig(props);
        String clusterId = config.kafkaClusterId();
        RestClient restClient = new RestClient(config);
        ConnectorClientConfigOverridePolicy policy = plugins.newPlugin(
                config.getString("connector.client.config.override.policy"), config,
                ConnectorClientConfigOverridePolicy.class);

        // As ConnectDistributed.createHerder: one admin client shared by the three stores.
        String clientIdBase = ConnectUtils.clientIdBase(config);
        Map<String, Object> adminProps = new HashMap<>(config.originals());
        ConnectUtils.addMetricsContextProperties(adminProps, config, clusterId);
        adminProps.put("client.id", clientIdBase + "shared-admin");
        SharedTopicAdmin sharedAdmin = new SharedTopicAdmin(adminProps);
        KafkaOffsetBackingStore offsetStore = new KafkaOffsetBackingStore(sharedAdmin, () -> clientIdBase,
                plugins.newInternalConverter(true, "org.apache.kafka.connect.json.JsonConverter",
                        Map.of("schemas.enable", "false")));
        offsetStore.configure(config);
        Worker worker = new Worker(workerId, Time.SYSTEM, plugins, config, offsetStore, policy);
        KafkaStatusBackingStore statusStore = new KafkaStatusBackingStore(Time.SYSTEM,
                worker.getInternalValueConverter(), sharedAdmin, clientIdBase);
        statusStore.configure(config);
        KafkaConfigBackingStore configStore = new KafkaConfigBackingStore(worker.getInternalValueConverter(),
                config, worker.configTransformer(), sharedAdmin, clientIdBase);
        DistributedHerder herder = new DistributedHerder(config, Time.SYSTEM, worker, clusterId, statusStore,
                configStore, url, restClient, policy, List.<String>of(), sharedAdmin);

        HttpServer http = HttpServer.create(new InetSocketAddress("127.0.0.1", port), 16);
        http.createContext("/connectors/", exchange -> forwardedTaskConfigs(herder, exchange));
        http.start();

        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            herder.stop();
            http.stop(0);
            event("stopped", Map.of());
        }));
        herder.start();
        event("started", Map.of("worker", workerId, "url", url));

        // Connectors are put by the leader: a follower's putConnectorConfig fails with
        // NotLeaderException (Connect's REST layer would forward it), so it is retried until this
        // worker leads or the connector exists.
        List<Map<String, String>> connectors = new ArrayList<>();
        for (int i = 1; i < args.length; i++) {
            connectors.add(load(Path.of(args[i])));
        }
        Thread watcher = new Thread(() -> watch(worker), "assignment-watcher");
        watcher.setDaemon(true);
        watcher.start();
        for (Map<String, String> connector : connectors) {
            put(herder, connector);
        }
        // Ends when the driver closes stdin (or kills the process).
        try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
            while (in.readLine() != null) {
                // nothing is read from stdin; its end is the signal to stop
            }
        }
        System.exit(0);
    }

    private static void put(DistributedHerder herder, Map<String, String> connector) throws Exception {
        String name = connector.get("name");
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
        while (true) {
            FutureCallback<Object> done = new FutureCallback<>();
            herder.putConnectorConfig(name, connector, true, (error, result) -> done.onCompletion(error, result));
            try {
                done.get(30, TimeUnit.SECONDS);
                event("put", Map.of("connector", name));
                return;
            } catch (Exception e) {
                if (System.nanoTime() > deadline) {
                    event("put_failed", Map.of("connector", name, "error", String.valueOf(e)));
                    return;
                }
                // Not the leader yet, or the herder still reading its config topic: try again.
                Thread.sleep(500);
            }
        }
    }

    /** The forwarded task configs of a connector this worker's herder leads for. */
    private static void forwardedTaskConfigs(DistributedHerder herder, HttpExchange exchange) {
        try (exchange) {
            String[] parts = exchange.getRequestURI().getPath().split("/");
            // "", "connectors", NAME, "tasks"
            if (!exchange.getRequestMethod().equals("POST") || parts.length != 4 || !parts[3].equals("tasks")) {
                exchange.sendResponseHeaders(404, -1);
                return;
            }
            byte[] body = exchange.getRequestBody().readAllBytes();
            List<Map<String, String>> taskConfigs = JSON.readValue(body, new TypeReference<>() { });
            InternalRequestSignature signature = null;
            String algorithm = exchange.getRequestHeaders().getFirst(InternalRequestSignature.SIGNATURE_ALGORITHM_HEADER);
            String encoded = exchange.getRequestHeaders().getFirst(InternalRequestSignature.SIGNATURE_HEADER);
            if (algorithm != null && encoded != null) {
                signature = new InternalRequestSignature(body, Mac.getInstance(algorithm), Base64.getDecoder().decode(encoded));
            }
            FutureCallback<Void> done = new FutureCallback<>();
            herder.putTaskConfigs(parts[2], taskConfigs, done, signature);
            int status = 204;
            byte[] answer = new byte[0];
            try {
                done.get(30, TimeUnit.SECONDS);
            } catch (Exception e) {
                status = 409;
                answer = ("{\"error_code\":409,\"message\":" + Json.string(String.valueOf(e.getCause())) + "}")
                        .getBytes(StandardCharsets.UTF_8);
            }
            event("forwarded_tasks", Map.of("connector", parts[2], "tasks", taskConfigs.size(), "status", status));
            exchange.getResponseHeaders().add("Content-Type", "application/json");
            exchange.sendResponseHeaders(status, answer.length == 0 ? -1 : answer.length);
            if (answer.length > 0) {
                exchange.getResponseBody().write(answer);
            }
        } catch (Exception e) {
            event("forward_failed", Map.of("error", String.valueOf(e)));
        }
    }

    /** Prints the connectors and tasks this worker runs whenever they change. */
    private static void watch(Worker worker) {
        String last = null;
        while (true) {
            List<String> connectors = new ArrayList<>(new TreeSet<>(worker.connectorNames()));
            List<String> tasks = new ArrayList<>();
            for (ConnectorTaskId id : worker.taskIds()) {
                tasks.add(id.connector() + "-" + id.task());
            }
            Collections.sort(tasks);
            String now = connectors + " " + tasks;
            if (!now.equals(last)) {
                Map<String, Object> fields = new LinkedHashMap<>();
                fields.put("connectors", connectors);
                fields.put("tasks", tasks);
                event("assignment", fields);
                last = now;
            }
            try {
                Thread.sleep(100);
            } catch (InterruptedException e) {
                return;
            }
        }
    }

    static synchronized void event(String name, Map<String, ?> fields) {
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("event", name);
        line.put("ms", System.currentTimeMillis());
        line.putAll(fields);
        String text = Json.object(line);
        System.out.println(text);
        System.out.flush();
        // The same line in the worker's log, beside what the herder logged then.
        System.err.println("[event] " + text);
    }

    static Map<String, String> load(Path file) throws Exception {
        java.util.Properties p = new java.util.Properties();
        try (var in = Files.newBufferedReader(file, StandardCharsets.UTF_8)) {
            p.load(in);
        }
        Map<String, String> out = new LinkedHashMap<>();
        for (String key : p.stringPropertyNames()) {
            out.put(key, p.getProperty(key));
        }
        return out;
    }
}
