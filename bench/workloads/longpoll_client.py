"""Many consumers waiting at once: `python -m bench.workloads.longpoll_client URL TOKEN TOPIC N`.

Opens N concurrent long-polling pulls (max_messages=1, wait_seconds=30, a distinct consumer
id each), prints "ready" once every request is sent, then, when each answers, records its
status, how many messages it got, the first one's data and when (time.time()). Prints the
results as JSON.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

import httpx


async def main(url: str, token: str, topic: str, count: int) -> None:
    limits = httpx.Limits(max_connections=count + 10, max_keepalive_connections=count + 10)
    results: list[dict[str, object]] = []
    sent = 0

    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60,
                                 headers={"Authorization": f"Bearer {token}"}) as client:
        async def one(i: int) -> None:
            nonlocal sent
            body = {"topic": topic, "group": "default", "consumer": f"lp-{i}", "max_messages": 1,
                    "wait_seconds": 30}
            sent += 1
            try:
                answer = await client.post("/api/v1/pull", json=body)
                at = time.time()
                got = answer.json().get("messages", []) if answer.status_code == 200 else []
                results.append({"status": answer.status_code, "messages": len(got), "at": at,
                                "data": got[0]["data"] if got else None,
                                "error": "" if answer.status_code == 200 else answer.text[:200]})
            except httpx.HTTPError as exc:
                results.append({"status": 0, "messages": 0, "at": time.time(), "error": repr(exc)})

        tasks = [asyncio.create_task(one(i)) for i in range(count)]
        while sent < count:
            await asyncio.sleep(0.01)
        print("ready", flush=True)
        await asyncio.gather(*tasks)
    print(json.dumps(results), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])))
