import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.Map;

/**
 * The MQ Center REST contract over {@code java.net.http}: one JSON request, one JSON answer.
 * A non-2xx answer raises {@link MqException} with the API.md error body's code and message.
 */
public final class MqClient {
    // HTTP/1.1: the JDK's default HTTP/2 upgrade on plain http is not understood by every server.
    private final HttpClient http = HttpClient.newBuilder()
            .version(HttpClient.Version.HTTP_1_1)
            .connectTimeout(Duration.ofSeconds(5))
            .build();
    private final String base;
    private final String token;

    public MqClient(String base, String token) {
        this.base = base.replaceAll("/+$", "");
        this.token = token;
    }

    /** MQ_BASE (default http://127.0.0.1:8000) and MQ_TOKEN from the environment. */
    public static MqClient fromEnvironment() {
        String token = System.getenv("MQ_TOKEN");
        if (token == null || token.isEmpty()) throw new IllegalStateException("set MQ_TOKEN");
        return new MqClient(System.getenv().getOrDefault("MQ_BASE", "http://127.0.0.1:8000"), token);
    }

    public Map<String, Object> post(String path, Object body, Duration timeout) throws IOException, InterruptedException {
        return send("POST", path, HttpRequest.BodyPublishers.ofString(Json.write(body)), timeout);
    }

    public Map<String, Object> get(String path) throws IOException, InterruptedException {
        return send("GET", path, HttpRequest.BodyPublishers.noBody(), Duration.ofSeconds(30));
    }

    private Map<String, Object> send(String method, String path, HttpRequest.BodyPublisher body, Duration timeout)
            throws IOException, InterruptedException {
        HttpRequest request = HttpRequest.newBuilder(URI.create(base + path))
                .timeout(timeout)
                .header("Authorization", "Bearer " + token)
                .header("Content-Type", "application/json")
                .header("Accept", "application/json")
                .method(method, body)
                .build();
        HttpResponse<String> response = http.send(request, HttpResponse.BodyHandlers.ofString());
        Map<String, Object> answer;
        try {
            answer = Json.object(Json.parse(response.body()));
        } catch (IllegalArgumentException | ClassCastException e) {
            throw new IOException(method + " " + path + ": HTTP " + response.statusCode() + " answered no JSON object: "
                    + response.body().substring(0, Math.min(200, response.body().length())), e);
        }
        if (response.statusCode() / 100 != 2) {
            Map<String, Object> error = Json.object(answer.get("error"));
            throw new MqException(response.statusCode(), (String) error.get("code"), (String) error.get("message"));
        }
        return answer;
    }

    public static final class MqException extends IOException {
        private static final long serialVersionUID = 1L;
        public final int status;
        public final String code;

        MqException(int status, String code, String message) {
            super(status + " " + code + ": " + message);
            this.status = status;
            this.code = code;
        }
    }
}
