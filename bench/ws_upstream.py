"""The API of bench/websocket.sh: a WebSocket echo server (RFC 6455) on 127.0.0.1:PORT.

    python3 bench/ws_upstream.py PORT

Answers every upgrade with its 101 and sends each data frame back as it came (unmasked), a ping
with a pong, a close with a close. Standard library only (asyncio, hashlib).
"""
import asyncio
import base64
import hashlib
import struct
import sys

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


async def read_frame(reader):
    first, second = await reader.readexactly(2)
    length = second & 0x7F
    if length == 126:
        length = struct.unpack(">H", await reader.readexactly(2))[0]
    elif length == 127:
        length = struct.unpack(">Q", await reader.readexactly(8))[0]
    mask = await reader.readexactly(4) if second & 0x80 else None
    payload = await reader.readexactly(length)
    if mask:
        payload = bytes(b ^ mask[i & 3] for i, b in enumerate(payload)) if length < 64 else unmask(payload, mask)
    return first, payload


def unmask(payload, mask):
    key = int.from_bytes((mask * ((len(payload) + 3) // 4))[: len(payload)], "big")
    return (int.from_bytes(payload, "big") ^ key).to_bytes(len(payload), "big")


def frame(first, payload):
    length = len(payload)
    if length < 126:
        head = bytes([first, length])
    elif length < 65536:
        head = bytes([first, 126]) + struct.pack(">H", length)
    else:
        head = bytes([first, 127]) + struct.pack(">Q", length)
    return head + payload


async def serve(reader, writer):
    try:
        head = await reader.readuntil(b"\r\n\r\n")
        key = next(line.split(b":", 1)[1].strip() for line in head.split(b"\r\n") if line.lower().startswith(b"sec-websocket-key:"))
        accept = base64.b64encode(hashlib.sha1(key + GUID).digest())
        writer.write(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " + accept + b"\r\n\r\n")
        while True:
            first, payload = await read_frame(reader)
            opcode = first & 0x0F
            if opcode == 9:
                writer.write(frame(0x8A, payload))
            elif opcode == 8:
                writer.write(frame(0x88, payload))
                await writer.drain()
                break
            else:
                writer.write(frame(first, payload))
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, StopIteration):
        pass
    writer.close()


async def main():
    server = await asyncio.start_server(serve, "127.0.0.1", int(sys.argv[1]), backlog=1024)
    async with server:
        await server.serve_forever()


asyncio.run(main())
