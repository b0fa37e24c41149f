"""A tiny RESP2 client (stdlib only) for the harness's own commands.

The harness and scripts/ use it to set servers up and to look at what a
binding wrote (SCRIPT FLUSH, SET, TYPE, DBSIZE, ACL SETUSER, SCAN, CONFIG,
INFO, ...), never to rate-limit: that is the bindings' job.

    r = Redis.from_url("redis://127.0.0.1:6379/")
    r("SET", "k", "v")            # one command, its reply
    r.pipeline(["PTTL", "a"], ["PTTL", "b"])   # several, one round trip

Replies: simple strings and bulk strings are bytes (str with decode=True),
integers int, arrays lists, nil None; an error reply raises ReplyError.
"""

import contextlib
import socket
import ssl
from urllib.parse import unquote, urlparse


class ReplyError(RuntimeError):
    """The server answered with an error reply (its text, prefix included)."""


class Redis:
    def __init__(
        self,
        host="127.0.0.1",
        port=6379,
        *,
        username=None,
        password=None,
        timeout=10,
        decode=False,
        tls_ca_file=None,
        tls_server_name=None,
    ):
        self.host, self.port, self.decode = host, port, decode
        sock = socket.create_connection((host, port), timeout=timeout)
        if tls_ca_file:
            ctx = ssl.create_default_context(cafile=tls_ca_file)
            sock = ctx.wrap_socket(sock, server_hostname=tls_server_name or host)
        self.sock = sock
        self.buf = sock.makefile("rb")
        if password is not None:
            self("AUTH", *([username] if username else []), password)

    @classmethod
    def from_url(cls, url, **kw):
        """redis://[user:password@]host:port/ (rediss:// needs tls_ca_file=)."""
        u = urlparse(url)
        if u.username is not None or u.password is not None:
            kw.setdefault("username", unquote(u.username) if u.username else None)
            kw.setdefault("password", unquote(u.password or ""))
        return cls(u.hostname or "127.0.0.1", u.port or 6379, **kw)

    def __call__(self, *args):
        (reply,) = self.pipeline(args)
        return reply

    def pipeline(self, *commands):
        """Sends every command, then reads every reply; the first error reply
        (after all were read, so the connection stays usable) raises."""
        out = bytearray()
        for args in commands:
            out += b"*%d\r\n" % len(args)
            for a in args:
                a = a if isinstance(a, bytes) else str(a).encode()
                out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.sock.sendall(out)
        replies, error = [], None
        for _ in commands:
            try:
                replies.append(self._read())
            except ReplyError as e:
                replies.append(e)
                error = error or e
        if error:
            raise error
        return replies

    def _text(self, data):
        return data.decode("utf-8", errors="replace") if self.decode else data

    def _read(self):
        line = self.buf.readline()
        if not line.endswith(b"\r\n"):
            raise ConnectionError(f"{self.host}:{self.port} closed the connection")
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return self._text(rest)
        if kind == b"-":
            raise ReplyError(rest.decode("utf-8", errors="replace"))
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self._text(self.buf.read(n + 2)[:-2])
        if kind == b"*":
            n = int(rest)
            if n < 0:
                return None
            # An error nested in an array (EXEC) is a value, not a failure of the array.
            items = []
            for _ in range(n):
                try:
                    items.append(self._read())
                except ReplyError as e:
                    items.append(e)
            return items
        raise ConnectionError(f"unexpected reply {line!r}")

    # A few helpers the harness uses often.

    def info(self, section):
        """INFO section as a dict of str."""
        text = self("INFO", section)
        text = text if isinstance(text, str) else text.decode()
        return dict(row.split(":", 1) for row in text.splitlines() if ":" in row)

    def scan_all(self, count=1000):
        """Every key, by SCAN."""
        cursor, keys = b"0", []
        while True:
            cursor, batch = self("SCAN", cursor, "COUNT", count)
            keys += batch
            if cursor in (b"0", "0"):
                return keys

    def keys_without_ttl(self):
        keys = self.scan_all()
        ttls = self.pipeline(*[["PTTL", k] for k in keys]) if keys else []
        # -1: no TTL; -2: expired since SCAN saw it.
        return [k for k, ttl in zip(keys, ttls) if ttl == -1]

    def close(self):
        # The reader holds the socket open too: close both.
        for f in (self.buf, self.sock):
            with contextlib.suppress(OSError):
                f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
