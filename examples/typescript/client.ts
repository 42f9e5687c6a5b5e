// A typed MQ Center client: types generated from /api/schema/ (npm run generate), calls
// through openapi-fetch. Produces a message, pulls it with a long-poll wait, acks it and
// reads its trace; prints one JSON line of what it saw.
// Usage: MQ_BASE=http://127.0.0.1:8000 MQ_TOKEN=... npm run generate && npm run build && npm start
import createClient from "openapi-fetch";
import type { paths } from "./schema.js";

const base = process.env.MQ_BASE ?? "http://127.0.0.1:8000";
const token = process.env.MQ_TOKEN;
if (!token) throw new Error("set MQ_TOKEN");
const topic = process.env.MQ_TOPIC ?? "orders";
const group = "typescript";
const consumer = `ts-${process.pid}`;

const mq = createClient<paths>({ baseUrl: base, headers: { Authorization: `Bearer ${token}` } });

function fail(what: string, error: unknown): never {
  throw new Error(`${what}: ${JSON.stringify(error)}`);
}

// The pull waits (up to 10 s) for the message the produce below stores.
const pulling = mq.POST("/api/v1/pull", {
  body: { topic, group, consumer, max_messages: 10, wait_seconds: 10 },
});
const produced = await mq.POST("/api/v1/messages", {
  body: { messages: [{ topic, group, data: { order: 42, lang: "typescript" }, key: "customer-7" }] },
});
if (produced.error) fail("produce", produced.error);
const id = produced.data.messages[0].id;

const pulled = await pulling;
if (pulled.error) fail("pull", pulled.error);
const ids = pulled.data.messages.map((message) => message.id);

const acked = await mq.POST("/api/v1/ack", {
  body: { consumer, results: ids.map((pulledId) => ({ id: pulledId, status: "SUCCESS" as const, log: "done in TypeScript" })) },
});
if (acked.error) fail("ack", acked.error);

const detail = await mq.GET("/api/v1/messages/{message_id}", { params: { path: { message_id: id } } });
if (detail.error) fail("trace", detail.error);

console.log(JSON.stringify({
  produced: id,
  pulled: ids,
  data: pulled.data.messages.map((message) => message.data),
  outcomes: acked.data.results.map((result) => result.outcome),
  status: detail.data.status,
  trace: detail.data.trace.map((event) => event.event),
}));
