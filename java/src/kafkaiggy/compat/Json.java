package kafkaiggy.compat;

import java.util.List;
import java.util.Map;

/** Just enough JSON writing for the result lines and the event lines; no library needed. */
public final class Json {
    private Json() {}

    public static String string(String s) {
        if (s == null) {
            return "null";
        }
        StringBuilder out = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"': out.append("\\\""); break;
                case '\\': out.append("\\\\"); break;
                case '\n': out.append("\\n"); break;
                case '\r': out.append("\\r"); break;
                case '\t': out.append("\\t"); break;
                default:
                    if (c < 0x20) {
                        out.append(String.format("\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
            }
        }
        return out.append('"').toString();
    }

    /** An object of the given fields, in order; values are strings, numbers, booleans or lists of those. */
    public static String object(Map<String, ?> fields) {
        StringBuilder out = new StringBuilder("{");
        boolean first = true;
        for (Map.Entry<String, ?> e : fields.entrySet()) {
            if (!first) {
                out.append(',');
            }
            first = false;
            out.append(string(e.getKey())).append(':').append(value(e.getValue()));
        }
        return out.append('}').toString();
    }

    private static String value(Object v) {
        if (v == null) {
            return "null";
        } else if (v instanceof Number || v instanceof Boolean) {
            return v.toString();
        } else if (v instanceof Map) {
            @SuppressWarnings("unchecked")
            Map<String, ?> m = (Map<String, ?>) v;
            return object(m);
        } else if (v instanceof List) {
            StringBuilder out = new StringBuilder("[");
            boolean first = true;
            for (Object item : (List<?>) v) {
                if (!first) {
                    out.append(',');
                }
                first = false;
                out.append(value(item));
            }
            return out.append(']').toString();
        } else {
            return string(v.toString());
        }
    }
}
