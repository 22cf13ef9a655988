package kafkaiggy.compat;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.common.utils.AppInfoParser;

/**
 * The Java client compatibility program (docs/compat.md, "The Java client"): the project's own
 * cases, each one use of the official Java client (kafka-clients) against a gateway, each citing
 * the spec rules it touches. Compiled once per client version; run by the Rust driver
 * (conformance/src/bin/compat_java.rs), one case per process.
 *
 * <pre>
 *   --list                      one JSON line per case: name, listener, quick, rules
 *   --case NAME --bootstrap H:P one JSON line with the case's result; exit 0 passed, 2 skipped, 1 failed
 *   --security-protocol P       PLAINTEXT (default), SASL_PLAINTEXT, SSL or SASL_SSL
 *   --sasl-username U --sasl-password S   SASL PLAIN credentials
 *   --ssl-ca PATH               the PEM CA certificate the client trusts
 * </pre>
 *
 * Every client call runs under a bounded timeout; no case waits unboundedly or sleeps to
 * synchronise. Event lines (the verifiable producer's and consumer's) go to stderr.
 */
public final class JavaCompat {
    /** A case's body: returns a one-line detail on success, throws on failure. */
    interface Body {
        String run(Ctx ctx) throws Exception;
    }

    /** Thrown by a case that cannot run here; it is reported as skipped, never as passed. */
    static final class Skip extends Exception {
        Skip(String why) {
            super(why);
        }
    }

    /** One registered case. {@code listener}: plain, sasl_plain or tls: which gateway it needs. */
    static final class Case {
        final String name;
        final String listener;
        final boolean quick;
        final List<String> rules;
        final Body body;

        Case(String name, String listener, boolean quick, List<String> rules, Body body) {
            this.name = name;
            this.listener = listener;
            this.quick = quick;
            this.rules = rules;
            this.body = body;
        }
    }

    static final List<Case> CASES = new ArrayList<>();

    static void add(String name, boolean quick, List<String> rules, Body body) {
        CASES.add(new Case(name, "plain", quick, rules, body));
    }

    static void add(String name, String listener, boolean quick, List<String> rules, Body body) {
        CASES.add(new Case(name, listener, quick, rules, body));
    }

    public static void main(String[] args) {
        ProducerCases.register();
        ConsumerCases.register();
        ConsumerProtocolCases.register();
        AdminCases.register();
        VerifiableCases.register();
        Map<String, String> opts = new LinkedHashMap<>();
        boolean list = false;
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (a.equals("--list")) {
                list = true;
            } else if (a.startsWith("--") && i + 1 < args.length) {
                opts.put(a.substring(2), args[++i]);
            } else {
                System.err.println("unknown argument: " + a);
                System.exit(64);
            }
        }
        if (list) {
            for (Case c : CASES) {
                Map<String, Object> line = new LinkedHashMap<>();
                line.put("case", c.name);
                line.put("listener", c.listener);
                line.put("quick", c.quick);
                line.put("rules", c.rules);
                System.out.println(Json.object(line));
            }
            System.exit(0);
        }
        String name = opts.get("case");
        String bootstrap = opts.get("bootstrap");
        if (name == null || bootstrap == null) {
            System.err.println("usage: --list | --case NAME --bootstrap HOST:PORT [--security-protocol P]"
                    + " [--sasl-username U --sasl-password S] [--ssl-ca PEM]");
            System.exit(64);
        }
        Case found = null;
        for (Case c : CASES) {
            if (c.name.equals(name)) {
                found = c;
            }
        }
        if (found == null) {
            System.err.println("no case named " + name);
            System.exit(64);
        }
        Ctx ctx = new Ctx(bootstrap, opts.getOrDefault("security-protocol", "PLAINTEXT"),
                opts.get("sasl-username"), opts.get("sasl-password"), opts.get("ssl-ca"));
        long started = System.nanoTime();
        String status;
        String detail;
        int code;
        try {
            detail = found.body.run(ctx);
            status = "passed";
            code = 0;
        } catch (Skip s) {
            status = "skipped";
            detail = s.getMessage();
            code = 2;
        } catch (Throwable t) {
            status = "failed";
            detail = Ctx.describe(t);
            code = 1;
            t.printStackTrace();
        }
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("case", found.name);
        line.put("client", AppInfoParser.getVersion());
        line.put("status", status);
        line.put("ms", (System.nanoTime() - started) / 1_000_000);
        line.put("rules", found.rules);
        line.put("detail", detail == null ? "" : detail);
        System.out.println(Json.object(line));
        System.out.flush();
        // The clients' threads are closed by the cases, but a case that failed half-way may leave
        // one behind: exit rather than wait for it.
        System.exit(code);
    }
}
