"""The reader of bench/sse.sh: STREAMS event streams at once, each read as an app reads it.

    python3 bench/sse_client.py PORT PATH TOKEN STREAMS EVENTS INTERVAL_MS

Opens STREAMS connections to 127.0.0.1:PORT at once, each `GET PATH?count=EVENTS&interval_ms=…`
with `Authorization: Bearer TOKEN` (an empty TOKEN sends none), and reads each chunked answer as
it arrives. Per stream, the time to the first event (from writing the request to the event's
arrival); per event, its delay (the arrival on CLOCK_MONOTONIC minus the stamp
bench/sse_upstream.py wrote in it). Prints one line:
`first_p50_ms first_p99_ms delay_p50_ms delay_p99_ms delay_max_ms events failures`.
"""
import asyncio
import sys
import time


def percentile(values, fraction):
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def stream(port, target, token, events, firsts, delays):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    authorization = f"Authorization: Bearer {token}\r\n" if token else ""
    started = time.monotonic_ns()
    writer.write(f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{authorization}\r\n".encode())
    head = await reader.readuntil(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(head.split(b"\r\n", 1)[0].decode())
    if b"chunked" not in head.lower():
        raise RuntimeError("not chunked")
    pending = b""
    seen = 0
    while True:
        size = int((await reader.readline()).split(b";")[0], 16)
        if size == 0:
            break
        pending += await reader.readexactly(size)
        await reader.readexactly(2)
        now = time.monotonic_ns()
        while b"\n\n" in pending:
            event, pending = pending.split(b"\n\n", 1)
            if not event.startswith(b"data: "):
                continue
            if seen == 0:
                firsts.append((now - started) / 1e6)
            delays.append((now - int(event[6:])) / 1e6)
            seen += 1
    writer.close()
    if seen != events:
        raise RuntimeError(f"{seen} of {events} events")


async def main():
    port, path, token = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    streams, events, interval = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
    target = f"{path}?count={events}&interval_ms={interval}"
    firsts, delays = [], []
    results = await asyncio.gather(
        *(stream(port, target, token, events, firsts, delays) for _ in range(streams)), return_exceptions=True
    )
    failures = [result for result in results if isinstance(result, BaseException)]
    for failure in failures[:3]:
        print(f"sse_client: {failure!r}", file=sys.stderr)
    print(
        f"{percentile(firsts, 0.5):.3f} {percentile(firsts, 0.99):.3f} {percentile(delays, 0.5):.3f} "
        f"{percentile(delays, 0.99):.3f} {max(delays, default=float('nan')):.3f} {len(delays)} {len(failures)}"
    )


asyncio.run(main())
