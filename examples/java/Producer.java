import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Produces orders to topic {@code orders}, group {@code billing}, and prints each stored
 * message's id. Usage: {@code MQ_BASE=... MQ_TOKEN=... java Producer [count]}.
 */
public final class Producer {
    public static void main(String[] args) throws Exception {
        MqClient client = MqClient.fromEnvironment();
        int count = args.length > 0 ? Integer.parseInt(args[0]) : 3;
        List<Object> messages = new ArrayList<>();
        for (int i = 1; i <= count; i++) {
            Map<String, Object> order = new LinkedHashMap<>();
            order.put("order", (long) i);
            order.put("amount", 10.5 * i);
            Map<String, Object> message = new LinkedHashMap<>();
            message.put("topic", "orders");
            message.put("group", "billing");
            message.put("data", order);
            message.put("key", "customer-" + (i % 2));
            message.put("dedup_key", "java-order-" + i);  // a retried produce never stores twice
            messages.add(message);
        }
        Map<String, Object> answer = client.post("/api/v1/messages", Map.of("messages", messages), Duration.ofSeconds(30));
        for (Object stored : Json.array(answer.get("messages"))) {
            Map<String, Object> entry = Json.object(stored);
            System.out.println("produced " + entry.get("id") + " " + entry.get("topic") + "/" + entry.get("group")
                    + (Boolean.TRUE.equals(entry.get("duplicate")) ? " (duplicate)" : ""));
        }
    }
}
