"""The app side of bench/websocket.sh: CONNECTIONS WebSockets at once, each sending MESSAGES
messages of SIZE bytes one after another and waiting for each echo.

    python3 bench/ws_client.py PORT PATH TOKEN CONNECTIONS MESSAGES SIZE [HOLD_SECONDS]

Opens every connection (`Authorization: Bearer TOKEN`; an empty TOKEN sends none), then each
sends a masked binary frame, reads its echo, and sends the next. Per message, the round trip
(written to echo read, CLOCK_MONOTONIC). Prints one line:
`open_p50_ms rtt_p50_ms rtt_p99_ms messages_per_second messages failures`.
With MESSAGES 0, it only opens the connections, prints `opened N` once all are open, holds them
HOLD_SECONDS (default 5) without a byte, and closes them: for the proxy's memory per connection.
"""
import asyncio
import base64
import os
import struct
import sys
import time


def percentile(values, fraction):
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def masked(payload):
    mask = os.urandom(4)
    key = int.from_bytes((mask * ((len(payload) + 3) // 4))[: len(payload)], "big")
    body = (int.from_bytes(payload, "big") ^ key).to_bytes(len(payload), "big") if payload else b""
    length = len(payload)
    if length < 126:
        head = bytes([0x82, 0x80 | length])
    elif length < 65536:
        head = bytes([0x82, 0x80 | 126]) + struct.pack(">H", length)
    else:
        head = bytes([0x82, 0x80 | 127]) + struct.pack(">Q", length)
    return head + mask + body


async def read_frame(reader):
    first, second = await reader.readexactly(2)
    length = second & 0x7F
    if length == 126:
        length = struct.unpack(">H", await reader.readexactly(2))[0]
    elif length == 127:
        length = struct.unpack(">Q", await reader.readexactly(8))[0]
    return first, await reader.readexactly(length)


async def connect(port, path, token, opens):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    key = base64.b64encode(os.urandom(16)).decode()
    authorization = f"Authorization: Bearer {token}\r\n" if token else ""
    started = time.monotonic_ns()
    writer.write(
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: {key}\r\n{authorization}\r\n".encode()
    )
    head = await reader.readuntil(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 101"):
        raise RuntimeError(head.split(b"\r\n", 1)[0].decode())
    opens.append((time.monotonic_ns() - started) / 1e6)
    return reader, writer


async def talk(reader, writer, messages, size, rtts):
    payload = os.urandom(size)
    for _ in range(messages):
        started = time.monotonic_ns()
        writer.write(masked(payload))
        first, echoed = await read_frame(reader)
        rtts.append((time.monotonic_ns() - started) / 1e6)
        if first & 0x0F != 2 or echoed != payload:
            raise RuntimeError("wrong echo")
    writer.write(bytes([0x88, 0x82]) + b"\x00\x00\x00\x00" + struct.pack(">H", 1000))
    await writer.drain()
    writer.close()


async def main():
    port, path, token = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    connections, messages, size = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
    opens, rtts = [], []
    opened = await asyncio.gather(*(connect(port, path, token, opens) for _ in range(connections)), return_exceptions=True)
    sockets = [pair for pair in opened if not isinstance(pair, BaseException)]
    failures = connections - len(sockets)
    if messages == 0:
        print(f"opened {len(sockets)}", flush=True)
        await asyncio.sleep(float(sys.argv[7]) if len(sys.argv) > 7 else 5)
        for _, writer in sockets:
            writer.close()
        return
    started = time.monotonic()
    results = await asyncio.gather(*(talk(r, w, messages, size, rtts) for r, w in sockets), return_exceptions=True)
    elapsed = time.monotonic() - started
    failures += sum(1 for result in results if isinstance(result, BaseException))
    rate = len(rtts) / elapsed if elapsed > 0 else 0
    print(f"{percentile(opens, 0.5):.2f} {percentile(rtts, 0.5):.3f} {percentile(rtts, 0.99):.3f} {rate:.0f} {len(rtts)} {failures}")


asyncio.run(main())
