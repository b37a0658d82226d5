"""N requests at once, each on its own connection: how many answered 200, and how long it took.

    python3 bench/burst.py URL N BEARER

Opens every connection first, then sends every request, then reads every answer (asyncio, one
thread), so all N are in flight together. Prints "ok=<count> errors=<count> seconds=<elapsed>".
"""
import asyncio, sys, time, urllib.parse


async def one(host, port, path, bearer, ready, go):
    try:
        reader, writer = await asyncio.open_connection(host, port)
    except OSError:
        ready.release()
        return False
    ready.release()
    await go.wait()
    writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {bearer}\r\nConnection: close\r\n\r\n".encode())
    try:
        status = await asyncio.wait_for(reader.readline(), 60)
        await asyncio.wait_for(reader.read(), 60)
    except (OSError, asyncio.TimeoutError):
        return False
    finally:
        writer.close()
    return status.split(b" ")[1:2] == [b"200"]


async def main():
    url, count, bearer = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    parts = urllib.parse.urlsplit(url)
    ready, go = asyncio.Semaphore(0), asyncio.Event()
    tasks = [asyncio.create_task(one(parts.hostname, parts.port, parts.path, bearer, ready, go)) for _ in range(count)]
    for _ in range(count):
        await ready.acquire()
    started = time.monotonic()
    go.set()
    results = await asyncio.gather(*tasks)
    ok = sum(results)
    print(f"ok={ok} errors={count - ok} seconds={time.monotonic() - started:.2f}")


asyncio.run(main())
