package kafkaiggy.connect;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.Writer;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;

/**
 * Connect worker processes ({@link ConnectWorker}) started by a case: each a JVM of its own on the
 * case's classpath, so that one can be SIGKILLed. Their events (stdout) are kept in order; their
 * logs (stderr) go to {@code <work>/<name>.log}.
 */
final class Workers {
    private static final ObjectMapper JSON = new ObjectMapper();

    /** One running worker. */
    static final class Proc {
        final String name;
        final Process process;
        final Path log;
        private final List<JsonNode> events = new ArrayList<>();

        Proc(String name, Process process, Path log) {
            this.name = name;
            this.process = process;
            this.log = log;
            Thread reader = new Thread(this::read, name + "-events");
            reader.setDaemon(true);
            reader.start();
        }

        private void read() {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
                String line;
                while ((line = in.readLine()) != null) {
                    if (!line.startsWith("{")) {
                        continue;
                    }
                    JsonNode event = JSON.readTree(line);
                    synchronized (this) {
                        events.add(event);
                        notifyAll();
                    }
                }
            } catch (IOException e) {
                // the process ended
            }
        }

        /** The first event (of any time) matching {@code match}, waited for up to {@code limit}. */
        synchronized JsonNode await(String what, Duration limit, Predicate<JsonNode> match) throws Exception {
            long deadline = System.nanoTime() + limit.toNanos();
            while (true) {
                for (JsonNode e : events) {
                    if (match.test(e)) {
                        return e;
                    }
                }
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    throw new AssertionError("worker " + name + ": no " + what + " within " + limit
                            + (process.isAlive() ? "" : " (the JVM ended)") + "; log " + log);
                }
                wait(Math.max(1, Math.min(TimeUnit.NANOSECONDS.toMillis(left), 200)));
            }
        }

        /** The last assignment event's tasks and connectors, or empty lists before the first. */
        synchronized List<String> assigned(String field) {
            for (int i = events.size() - 1; i >= 0; i--) {
                JsonNode e = events.get(i);
                if (e.path("event").asText().equals("assignment")) {
                    List<String> out = new ArrayList<>();
                    e.path(field).forEach(n -> out.add(n.asText()));
                    return out;
                }
            }
            return List.of();
        }

        /** Whether the worker's latest assignment runs the task or connector {@code unit}. */
        boolean runs(String unit) {
            return assigned("tasks").contains(unit) || assigned("connectors").contains(unit);
        }

        /** SIGKILL: no shutdown hook runs, nothing is committed. */
        void kill() throws Exception {
            process.destroyForcibly();
            process.waitFor(30, TimeUnit.SECONDS);
        }

        /** A graceful stop: stdin closed, the herder stopped (offsets committed); SIGTERM, then SIGKILL, if it lingers. */
        void stop() throws Exception {
            process.getOutputStream().close();
            if (!process.waitFor(60, TimeUnit.SECONDS)) {
                process.destroy();
                if (!process.waitFor(20, TimeUnit.SECONDS)) {
                    process.destroyForcibly();
                }
            }
        }
    }

    private final Path work;
    private final List<Proc> started = new ArrayList<>();

    Workers(Path work) {
        this.work = work;
    }

    /** A free loopback port for a worker's internal endpoint. */
    static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        }
    }

    /** Starts a worker with these properties, putting the connectors once it leads. */
    Proc start(String name, Properties props, List<Properties> connectors) throws Exception {
        Path config = work.resolve(name + ".properties");
        write(config, props);
        List<String> command = new ArrayList<>();
        command.add(ProcessHandle.current().info().command().orElse("java"));
        command.add("-Xmx384m");
        command.add("-Dlog4j2.configurationFile=" + work.resolve("log4j2.properties"));
        command.add("-cp");
        command.add(System.getProperty("java.class.path"));
        command.add(ConnectWorker.class.getName());
        command.add(config.toString());
        for (int i = 0; i < connectors.size(); i++) {
            Path file = work.resolve(name + "-connector-" + i + ".properties");
            write(file, connectors.get(i));
            command.add(file.toString());
        }
        Path log = work.resolve(name + ".log");
        Process p = new ProcessBuilder(command).redirectError(log.toFile()).start();
        Proc proc = new Proc(name, p, log);
        started.add(proc);
        return proc;
    }

    static void write(Path file, Properties props) throws IOException {
        try (Writer out = Files.newBufferedWriter(file, StandardCharsets.UTF_8)) {
            props.store(out, null);
        }
    }

    /** Ends every worker still running (a case that failed half-way). */
    void close() {
        for (Proc p : started) {
            p.process.destroyForcibly();
        }
    }

    /** The log4j2 configuration the workers log with: INFO to stderr, Connect's chatter trimmed. */
    static void writeLogConfig(Path work) throws IOException {
        Files.writeString(work.resolve("log4j2.properties"), String.join("\n",
                "status = error",
                "appender.err.type = Console",
                "appender.err.name = err",
                "appender.err.target = SYSTEM_ERR",
                "appender.err.layout.type = PatternLayout",
                "appender.err.layout.pattern = [%d] %p %m (%c{1})%n",
                "rootLogger.level = info",
                "rootLogger.appenderRef.err.ref = err",
                "logger.clients.name = org.apache.kafka.clients",
                "logger.clients.level = warn",
                "logger.common.name = org.apache.kafka.common",
                "logger.common.level = warn",
                "logger.reflections.name = org.reflections",
                "logger.reflections.level = error",
                ""));
    }

    static Map<String, String> map(Properties p) {
        Map<String, String> out = new java.util.LinkedHashMap<>();
        for (String k : p.stringPropertyNames()) {
            out.put(k, p.getProperty(k));
        }
        return out;
    }
}
