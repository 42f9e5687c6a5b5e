"""Many consumers waiting at once: `python -m bench.workloads.longpoll_client URL TOKEN TOPIC N`.

Opens N concurrent long-polling pulls (max_messages=1, wait_seconds=30, a distinct consumer
id each), prints "ready" once every request is sent, then, when each answers, records its
status, how many messages it got, the first one's data and when (time.time()). Prints the
results as JSON.

aiohttp, not httpx: with a thousand connections open, httpx's async pool spent a full core
walking its connection list, so the client, not the broker, set the wake-up times measured
(the client sat at 100% CPU while the broker idled).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

import aiohttp


async def main(url: str, token: str, topic: str, count: int) -> None:
    results: list[dict[str, object]] = []
    sent = 0
    connector = aiohttp.TCPConnector(limit=count + 10)
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(base_url=url, connector=connector, timeout=timeout,
                                     headers={"Authorization": f"Bearer {token}"}) as session:
        async def one(i: int) -> None:
            nonlocal sent
            body = {"topic": topic, "group": "default", "consumer": f"lp-{i}", "max_messages": 1,
                    "wait_seconds": 30}
            sent += 1
            try:
                async with session.post("/api/v1/pull", json=body) as answer:
                    text = await answer.text()
                at = time.time()
                got = json.loads(text).get("messages", []) if answer.status == 200 else []
                results.append({"status": answer.status, "messages": len(got), "at": at,
                                "data": got[0]["data"] if got else None,
                                "error": "" if answer.status == 200 else text[:200]})
            except (TimeoutError, aiohttp.ClientError) as exc:
                results.append({"status": 0, "messages": 0, "at": time.time(), "error": repr(exc)})

        tasks = [asyncio.create_task(one(i)) for i in range(count)]
        while sent < count:
            await asyncio.sleep(0.01)
        print("ready", flush=True)
        await asyncio.gather(*tasks)
    print(json.dumps(results), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])))
