import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Pulls from topic {@code orders}, group {@code billing} (long-polling up to 10 s), acks each
 * message SUCCESS, and prints its trace. Stops after {@code expected} messages or an empty
 * pull. Usage: {@code MQ_BASE=... MQ_TOKEN=... java Consumer [expected]}. Reading the trace
 * takes an admin token; a consume-only token prints the acks.
 */
public final class Consumer {
    public static void main(String[] args) throws Exception {
        MqClient client = MqClient.fromEnvironment();
        int expected = args.length > 0 ? Integer.parseInt(args[0]) : Integer.MAX_VALUE;
        String consumer = "java-" + ProcessHandle.current().pid();
        int done = 0;
        while (done < expected) {
            Map<String, Object> pull = new LinkedHashMap<>();
            pull.put("topic", "orders");
            pull.put("group", "billing");
            pull.put("consumer", consumer);
            pull.put("max_messages", 10L);
            pull.put("wait_seconds", 10L);
            // The HTTP timeout outlasts the long-poll.
            List<Object> messages = Json.array(client.post("/api/v1/pull", pull, Duration.ofSeconds(40)).get("messages"));
            if (messages.isEmpty()) break;
            List<Object> results = new ArrayList<>();
            for (Object item : messages) {
                Map<String, Object> message = Json.object(item);
                System.out.println("pulled " + message.get("id") + " attempt " + message.get("attempt")
                        + " data " + Json.write(message.get("data")));
                Map<String, Object> result = new LinkedHashMap<>();
                result.put("id", message.get("id"));
                result.put("status", "SUCCESS");
                result.put("log", "charged by " + consumer);
                results.add(result);
            }
            Map<String, Object> ack = new LinkedHashMap<>();
            ack.put("consumer", consumer);
            ack.put("results", results);
            for (Object outcome : Json.array(client.post("/api/v1/ack", ack, Duration.ofSeconds(30)).get("results"))) {
                Map<String, Object> entry = Json.object(outcome);
                System.out.println("acked " + entry.get("id") + " " + entry.get("outcome"));
                printTrace(client, entry.get("id"));
                done++;
            }
        }
    }

    private static void printTrace(MqClient client, Object id) throws Exception {
        try {
            Map<String, Object> message = client.get("/api/v1/messages/" + id);
            StringBuilder events = new StringBuilder();
            for (Object event : Json.array(message.get("trace"))) {
                events.append(' ').append(Json.object(event).get("event"));
            }
            System.out.println("trace " + id + " " + message.get("status") + ":" + events);
        } catch (MqClient.MqException e) {
            if (e.status != 403) throw e;  // not an admin token: no trace to show
        }
    }
}
