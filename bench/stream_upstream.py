"""The upstream of bench/stream.sh: a large download and an upload sink, on loopback.

    python3 bench/stream_upstream.py PORT

GET /big     1 GiB (Content-Length set), written as fast as the reader takes it.
POST|PUT /sink  reads the body (Content-Length or chunked) and answers how many bytes arrived.
Each transfer's byte count is printed on standard output when it ends, however it ends.
"""
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SIZE = 1 << 30
CHUNK = bytes(64 * 1024)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(SIZE))
        self.end_headers()
        sent = 0
        try:
            while sent < SIZE:
                self.wfile.write(CHUNK)
                sent += len(CHUNK)
        except OSError:
            pass
        print(f"download {sent}", flush=True)

    def read_body(self):
        self.received = 0
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    self.rfile.readline()
                    return self.received
                while size > 0:
                    piece = self.rfile.read(min(size, 65536))
                    if not piece:
                        raise OSError("closed")
                    size -= len(piece)
                    self.received += len(piece)
                self.rfile.readline()
        left = int(self.headers.get("Content-Length", "0"))
        while left > 0:
            piece = self.rfile.read(min(left, 65536))
            if not piece:
                raise OSError("closed")
            left -= len(piece)
            self.received += len(piece)
        return self.received

    def do_POST(self):
        try:
            received = self.read_body()
        except (OSError, ValueError):
            print(f"upload cut {self.received}", flush=True)
            return
        print(f"upload {received}", flush=True)
        body = str(received).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_PUT = do_POST


ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
