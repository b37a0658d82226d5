"""The upstream of bench/sse.sh: streams of server-sent events, on loopback.

    python3 bench/sse_upstream.py PORT

GET /events?count=N&interval_ms=M answers `text/event-stream`, chunked: N events, the first at
once and then one every M ms, each `data: <CLOCK_MONOTONIC in ns when written>` in a chunk of
its own, then the last chunk; the connection stays open for the next request (keep-alive). The
reader (bench/sse_client.py, on the same machine) subtracts the stamp from its own clock when
the event arrives: the event's delay through whatever is in between.
"""
import asyncio
import sys
import time
from urllib.parse import parse_qs, urlsplit


async def serve(reader, writer):
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            target = head.split(b" ", 2)[1].decode()
            query = parse_qs(urlsplit(target).query)
            count = int(query.get("count", ["10"])[0])
            interval = int(query.get("interval_ms", ["100"])[0]) / 1000
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n"
            )
            start = time.monotonic()
            for index in range(count):
                # On the interval's grid, so a late wake-up does not shift the rest.
                delay = start + index * interval - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                event = b"data: %d\n\n" % time.monotonic_ns()
                writer.write(b"%x\r\n%s\r\n" % (len(event), event))
                await writer.drain()
            writer.write(b"0\r\n\r\n")
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def main(port):
    server = await asyncio.start_server(serve, "127.0.0.1", port, backlog=1024)
    async with server:
        await server.serve_forever()


asyncio.run(main(int(sys.argv[1])))
