"""devtools.bench.load.Client, the benchmark's own HTTP/1.1 client over a socket, against a real
server: it keeps one connection for many requests, reads a Content-Length, chunked or closed
answer whole, and a connection the server closed between requests costs one retry, not an error."""

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from devtools.bench.load import Client


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    connections: list = []
    BIG = bytes(range(256)) * 4096  # 1 MB: many receives

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.connections.append(self.client_address)
        if self.path == "/cut-off":  # processed, then the answer stops short
            self.wfile.write(b'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"ok": t')
            self.close_connection = True
        elif self.path == "/interim":
            self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n")
            self._answer(201, b"{}")
        else:
            self._answer(200, b'{"ok": true, "got": %d}' % len(body))

    def do_HEAD(self):
        self.connections.append(self.client_address)
        self.send_response(200)
        self.send_header("Content-Length", "12345")  # what a GET would send; a HEAD answer has no body
        self.end_headers()

    def do_GET(self):
        self.connections.append(self.client_address)
        if self.path == "/chunked":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for part in (b"hello, ", b"chunked ", b"world"):
                self.wfile.write(b"%x;ext=1\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\nX-Trailer: yes\r\n\r\n")
        elif self.path == "/close":
            self.send_response(200)
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(b"until the end")
            self.close_connection = True
        elif self.path == "/big":
            self._answer(200, self.BIG)
        elif self.path == "/empty":
            self.send_response(204)
            self.end_headers()
        elif self.path == "/interim-forever":
            self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n" * 9 + b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
        elif self.path == "/endless-head":
            self.wfile.write(b"HTTP/1.1 200 OK\r\nX-Filler: " + b"a" * (2 << 20))
            self.close_connection = True
        elif self.path == "/hang-up":
            self.close_connection = True  # closes without answering, as an idle keep-alive timeout does
        else:
            self._answer(404, b"{}")

    def _answer(self, status: int, body: bytes):
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    _Handler.connections = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_many_requests_share_one_kept_connection(server):
    client = Client(server)
    body = b"x" * 21_000
    replies = [client.request("POST", "/github/callback", body, {"Content-Type": "application/json"}) for _ in range(5)]
    client.close()
    assert [(r.status, r.json()) for r in replies] == [(200, {"ok": True, "got": 21_000})] * 5
    assert len(set(_Handler.connections)) == 1


def test_a_chunked_answer_is_read_whole_and_the_connection_kept(server):
    client = Client(server)
    first = client.get("/chunked")
    second = client.get("/missing")
    client.close()
    assert (first.status, first.body) == (200, b"hello, chunked world")
    assert second.status == 404
    assert len(set(_Handler.connections)) == 1


def test_an_answer_ended_by_closing_is_read_to_the_end_and_the_next_request_reconnects(server):
    client = Client(server)
    closed = client.get("/close")
    after = client.request("POST", "/x", b"{}")
    client.close()
    assert (closed.status, closed.body) == (200, b"until the end")
    assert after.status == 200
    assert len(set(_Handler.connections)) == 2


def test_a_connection_the_server_closed_between_requests_is_retried_once(server):
    client = Client(server)
    assert client.request("POST", "/x", b"{}").status == 200
    hung_up = client.get("/hang-up")  # the server closes the kept connection instead of answering
    assert hung_up.status == 0 and "RemoteDisconnected" in hung_up.error  # ... twice: a retry, then the error
    assert client.request("POST", "/x", b"{}").status == 200
    client.close()
    assert len(set(_Handler.connections)) == 3  # the kept one, the retry's, the next request's


def test_nothing_listening_is_an_error_reply_not_an_exception():
    client = Client("http://127.0.0.1:9", timeout=2)
    reply = client.get("/")
    assert reply.status == 0 and reply.error


def test_an_answer_cut_off_after_the_request_was_processed_is_an_error_not_a_second_request(server):
    client = Client(server)
    reply = client.request("POST", "/cut-off", b"{}")
    client.close()
    assert reply.status == 0 and "ended early" in reply.error
    assert len(_Handler.connections) == 1  # a callback's token is not used twice


def test_interim_answers_are_read_past_and_the_next_answer_stays_in_step(server):
    client = Client(server)
    interim = client.request("POST", "/interim", b"{}")
    after = client.request("POST", "/x", b"{}")
    client.close()
    assert interim.status == 201
    assert (after.status, after.json()) == (200, {"ok": True, "got": 2})


def test_big_bodyless_and_head_answers_keep_the_connection_in_step(server):
    client = Client(server)
    big = client.get("/big")
    empty = client.get("/empty")
    head = client.request("HEAD", "/big")
    last = client.get("/big")
    client.close()
    assert (big.status, big.body) == (200, _Handler.BIG) and (last.status, last.body) == (200, _Handler.BIG)
    assert (empty.status, empty.body, head.status, head.body) == (204, b"", 200, b"")
    assert len(set(_Handler.connections)) == 1


@pytest.mark.parametrize("path", ["/interim-forever", "/endless-head"])
def test_an_answer_that_never_ends_its_head_is_an_error_reply_not_an_endless_read(server, path):
    client = Client(server)
    reply = client.get(path)
    client.close()
    assert reply.status == 0 and reply.error.startswith("ValueError")
