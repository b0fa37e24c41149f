"""Servers for the harness, all on loopback, each stopped by its own pid or
socket: redis-server processes in temp dirs (restartable on the same port),
test certificates made with the openssl CLI, a TCP proxy that adds latency,
a proxy that rewrites script replies, a listener that never answers, and a
port that refuses connections.
"""

import contextlib
import os
import queue
import shutil
import socket
import subprocess
import tempfile
import threading
import time

from harness.resp import Redis


def free_port():
    """A loopback port nothing listens on now (the kernel picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    """A redis-server child of this process (not daemonized: its pid is ours),
    saving nothing, in a temp dir. start() after stop() brings up an empty
    server, without a script cache, on the same port.

    tls: a Certificates (or a view, with_server_cert); then the server speaks
    TLS only (--port 0), and admin connections check the name tls_name.
    server: the binary (default $SLIDELIMIT_REDIS_SERVER, else redis-server);
    wrapper: a command it runs under, e.g. valgrind and its options (one that
    runs it in the same process, so the pid is still the server's)."""

    def __init__(self, port=None, args=(), tls=None, tls_name="localhost", server=None, wrapper=()):
        self.port = port or free_port()
        self.tls, self.tls_name = tls, tls_name
        self.dir = tempfile.mkdtemp(prefix=f"slidelimit-faults-redis-{self.port}-")
        self.extra = list(args)
        self.server, self.wrapper = server, list(wrapper)
        self.proc = None
        self.starts = 0
        self._clients = []

    @property
    def url(self):
        return f"{'rediss' if self.tls else 'redis'}://127.0.0.1:{self.port}/"

    def _argv(self):
        argv = [
            *self.wrapper,
            self.server or os.environ.get("SLIDELIMIT_REDIS_SERVER", "redis-server"),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            self.dir,
            "--logfile",
            os.path.join(self.dir, f"redis-{self.starts}.log"),
        ]
        if self.tls:
            argv += [
                "--port",
                "0",
                "--tls-port",
                str(self.port),
                "--tls-cert-file",
                self.tls.path("server.crt"),
                "--tls-key-file",
                self.tls.path("server.key"),
                "--tls-ca-cert-file",
                self.tls.path("ca.crt"),
                "--tls-auth-clients",
                "no",
            ]
        else:
            argv += ["--port", str(self.port)]
        return argv + self.extra

    def start(self, timeout_s=10):
        """Starts the server; returns once it answers PING as this very pid."""
        self.starts += 1
        self.proc = subprocess.Popen(
            self._argv(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"redis-server on :{self.port} exited {self.proc.returncode}: {self.log()}"
                )
            try:
                with self.client(timeout=1) as r:
                    if int(r.info("server")["process_id"]) == self.proc.pid:
                        return self
            except (OSError, RuntimeError, KeyError):
                pass
            time.sleep(0.02)
        self.stop()
        raise RuntimeError(
            f"redis-server on :{self.port} did not start in {timeout_s} s: {self.log()}"
        )

    def log(self):
        try:
            with open(os.path.join(self.dir, f"redis-{self.starts}.log")) as f:
                return f.read()[-2000:]
        except OSError:
            return "(no log)"

    def stop(self):
        """SIGKILL to our pid (a crash: nothing is saved); waits until it is gone."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def restart(self):
        self.stop()
        return self.start()

    def client(self, timeout=10, decode=False, **kw):
        """An admin connection (TLS when the server speaks TLS)."""
        if self.tls:
            kw.setdefault("tls_ca_file", self.tls.path("ca.crt"))
            kw.setdefault("tls_server_name", self.tls_name)
        client = Redis("127.0.0.1", self.port, timeout=timeout, decode=decode, **kw)
        self._clients.append(client)
        return client

    def close(self):
        for client in self._clients:
            client.close()
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


class Certificates:
    """In a temp dir, made with the openssl CLI (EC P-256, valid 2 days):
    ca.crt/key; server.crt/key for DNS:localhost and IP:127.0.0.1, by ca;
    misnamed.crt/key for DNS:redis.example only, by ca; other-ca.crt, a CA
    nobody trusts. path(name) is a file's absolute path."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="slidelimit-faults-tls-")
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        for ca in ("ca", "other-ca"):
            self._openssl(
                "req",
                "-x509",
                *ec,
                "-keyout",
                f"{ca}.key",
                "-out",
                f"{ca}.crt",
                "-days",
                "2",
                "-subj",
                f"/CN=slidelimit faults {ca}",
            )
        for name, cn, san in (
            ("server", "localhost", "DNS:localhost,IP:127.0.0.1"),
            ("misnamed", "redis.example", "DNS:redis.example"),
        ):
            self._openssl(
                "req", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={cn}"
            )
            with open(self.path(f"{name}.ext"), "w") as f:
                f.write(
                    "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\n"
                    f"extendedKeyUsage=serverAuth\nsubjectAltName={san}\n"
                )
            self._openssl(
                "x509",
                "-req",
                "-in",
                f"{name}.csr",
                "-CA",
                "ca.crt",
                "-CAkey",
                "ca.key",
                "-set_serial",
                str(2 + len(name)),
                "-days",
                "2",
                "-extfile",
                f"{name}.ext",
                "-out",
                f"{name}.crt",
            )

    def _openssl(self, *args):
        p = subprocess.run(["openssl", *args], cwd=self.dir, capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"openssl {' '.join(args)}: {p.stderr.strip()}")

    def path(self, name):
        return os.path.join(self.dir, name)

    def with_server_cert(self, name):
        """A view of these certificates whose server.crt/key is NAME.crt/key."""
        return _CertView(self, name)

    def close(self):
        shutil.rmtree(self.dir, ignore_errors=True)


class _CertView:
    def __init__(self, certs, server):
        self.certs, self.server = certs, server

    def path(self, name):
        if name in ("server.crt", "server.key"):
            name = self.server + name[len("server") :]
        return self.certs.path(name)


class _Listener:
    """A loopback listener whose accepted sockets are kept and closed on close()."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.conns = []
        self.lock = threading.Lock()
        self.closed = False
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    @property
    def url(self):
        return f"redis://127.0.0.1:{self.port}/"

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return  # closed
            with self.lock:
                if self.closed:
                    conn.close()
                    return
                self.conns.append(conn)
            self.on_accept(conn)

    def on_accept(self, conn):
        pass

    def _connect_upstream(self, down, port):
        """A connection to 127.0.0.1:port for the accepted `down`, closed
        with the listener; None (and `down` closed) when refused."""
        try:
            up = socket.create_connection(("127.0.0.1", port), timeout=2)
        except OSError:
            down.close()
            return None
        up.settimeout(None)
        with self.lock:
            self.conns.append(up)
        return up

    def close(self):
        with self.lock:
            self.closed = True
            conns, self.conns = self.conns, []
        # shutdown() wakes a thread blocked in accept(); close() alone may not.
        for s in [self.sock, *conns]:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()
        self.thread.join(5)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


class Silent(_Listener):
    """Accepts connections and never answers: a Redis that hangs."""


class SlowProxy(_Listener):
    """Forwards to 127.0.0.1:upstream, holding every chunk `delay_ms` (one
    way, changeable at any time) before passing it on, in both directions.
    Chunks keep their order and are not delayed by one another."""

    def __init__(self, upstream):
        self.upstream = upstream
        self.delay_ms = 0
        super().__init__()

    def on_accept(self, down):
        up = self._connect_upstream(down, self.upstream)
        if up is None:
            return
        for src, dst in ((down, up), (up, down)):
            chunks: queue.Queue[tuple[float, bytes]] = queue.Queue()
            threading.Thread(target=self._read, args=(src, chunks), daemon=True).start()
            threading.Thread(target=self._write, args=(dst, chunks), daemon=True).start()

    def _read(self, src, chunks):
        while True:
            try:
                data = src.recv(16384)
            except OSError:
                data = b""
            chunks.put((time.monotonic() + self.delay_ms / 1000, data))
            if not data:
                return

    def _write(self, dst, chunks):
        while True:
            due, data = chunks.get()
            if not data:
                with contextlib.suppress(OSError):
                    dst.shutdown(socket.SHUT_WR)
                return
            time.sleep(max(0.0, due - time.monotonic()))
            try:
                dst.sendall(data)
            except OSError:
                return


class _Incomplete(Exception):
    """The buffer ends inside a RESP value: wait for more bytes."""


def _resp_end(buf, at=0):
    """Where the RESP2 or RESP3 value starting at buf[at] ends, or
    _Incomplete. An attribute (`|`) is read with the value it annotates."""
    line_end = buf.find(b"\r\n", at)
    if line_end < 0:
        raise _Incomplete
    kind, head, end = buf[at : at + 1], buf[at + 1 : line_end], line_end + 2
    if kind in b"+-:_,#(":
        return end
    if kind in b"$!=":
        n = int(head)
        if n < 0:
            return end
        if len(buf) < end + n + 2:
            raise _Incomplete
        return end + n + 2
    if kind in b"*~>%|":
        n = int(head)
        count = 2 * n if kind in b"%|" else max(n, 0)
        for _ in range(count):
            end = _resp_end(buf, end)
        return _resp_end(buf, end) if kind == b"|" else end
    raise ConnectionError(f"not RESP: {bytes(buf[at : at + 16])!r}")


def _command(buf):
    """(arguments, end) of the command at the start of buf (clients send an
    array of bulk strings), or _Incomplete."""
    end = _resp_end(buf)
    at = buf.find(b"\r\n") + 2
    args = []
    while at < end:
        size_end = buf.find(b"\r\n", at)
        n = int(buf[at + 1 : size_end])
        args.append(bytes(buf[size_end + 2 : size_end + 2 + n]))
        at = size_end + 2 + n + 2
    return args, end


class ReplyRewriter(_Listener):
    """Forwards to 127.0.0.1:upstream and, while `reply` is set (a value for
    resp_encode), answers every script call (EVALSHA, EVAL and their _RO
    forms) that Redis ran with `reply` instead of what Redis sent, in the
    protocol the connection chose (HELLO 3: RESP3). An error reply (NOSCRIPT,
    a script's own error) passes unchanged, and so does everything else: the
    client's handshake and the script's writes are Redis's own. `rewritten`
    counts the replies replaced. (No push messages: nothing here subscribes
    or tracks keys.)"""

    SCRIPT_CALLS = frozenset({b"EVALSHA", b"EVAL", b"EVALSHA_RO", b"EVAL_RO"})
    # What a Cluster node answers a call whose keys its migrating slot holds
    # only some of.
    TRYAGAIN = b"-TRYAGAIN Multiple keys request during rehashing of slot\r\n"

    def __init__(self, upstream):
        self.upstream = upstream
        self.reply = NO_REWRITE
        self.rewritten = 0
        # While `refuse` > 0, each script call is refused instead (one fewer
        # each): Redis gets a PING in its place, so it never runs and replies
        # keep their order, and the client gets `refusal`. `refused` counts them.
        self.refuse = 0
        self.refusal = self.TRYAGAIN
        self.refused = 0
        super().__init__()

    def on_accept(self, down):
        up = self._connect_upstream(down, self.upstream)
        if up is None:
            return
        # Redis answers in order: each command's name, oldest first, the
        # protocol a HELLO asked for, and whether it was refused.
        sent: queue.Queue[tuple[bytes, bytes | None, bool]] = queue.Queue()
        threading.Thread(target=self._commands, args=(down, up, sent), daemon=True).start()
        threading.Thread(target=self._replies, args=(up, down, sent), daemon=True).start()

    @staticmethod
    def _pump(src, dst, split):
        """Reads src, cuts it into whole RESP values with split(buf) ->
        (end, bytes to send) and sends those to dst, until either side closes."""
        buf = bytearray()
        while True:
            try:
                data = src.recv(16384)
            except OSError:
                data = b""
            if not data:
                with contextlib.suppress(OSError):
                    dst.shutdown(socket.SHUT_WR)
                return
            buf += data
            out = bytearray()
            while buf:
                try:
                    end, chunk = split(buf)
                except _Incomplete:
                    break
                out += chunk
                del buf[:end]
            try:
                dst.sendall(out)
            except OSError:
                return

    def _commands(self, down, up, sent):
        def split(buf):
            args, end = _command(buf)
            name = args[0].upper() if args else b""
            with self.lock:
                refused = name in self.SCRIPT_CALLS and self.refuse > 0
                if refused:
                    self.refuse -= 1
                    self.refused += 1
            if refused:
                sent.put((b"", None, True))
                return end, b"*1\r\n$4\r\nPING\r\n"
            # HELLO's protocol, if it names one.
            version = args[1] if name == b"HELLO" and len(args) > 1 and args[1].isdigit() else None
            sent.put((name, version, False))  # before Redis can see it, so before its reply
            return end, bytes(buf[:end])

        self._pump(down, up, split)

    def _replies(self, up, down, sent):
        resp3 = False

        def split(buf):
            nonlocal resp3
            end = _resp_end(buf)
            original = bytes(buf[:end])
            name, version, refused = sent.get(timeout=10)
            if refused:
                return end, self.refusal
            failed = original[:1] in b"-!"
            if version is not None and not failed:
                resp3 = version == b"3"
            substitute = self.reply
            if name in self.SCRIPT_CALLS and substitute is not NO_REWRITE and not failed:
                self.rewritten += 1
                return end, resp_encode(substitute, resp3)
            return end, original

        self._pump(up, down, split)


NO_REWRITE = object()


class Simple:
    """A RESP simple string (`+OK`) for resp_encode."""

    def __init__(self, text):
        self.text = text


def resp_encode(value, resp3=False):
    """The RESP bytes of a reply as Redis would send it: int, bytes or str
    (a bulk string), None (nil: `_` in RESP3), a list (an array of these), or
    Simple("OK") (a status line)."""
    if isinstance(value, bool):
        raise TypeError("a script reply has no bool; use 0 or 1")
    if isinstance(value, int):
        return b":%d\r\n" % value
    if isinstance(value, Simple):
        return b"+%s\r\n" % value.text.encode()
    if isinstance(value, (bytes, str)):
        data = value if isinstance(value, bytes) else value.encode()
        return b"$%d\r\n%s\r\n" % (len(data), data)
    if value is None:
        return b"_\r\n" if resp3 else b"$-1\r\n"
    if isinstance(value, list):
        return b"*%d\r\n" % len(value) + b"".join(resp_encode(v, resp3) for v in value)
    raise TypeError(f"no RESP form for {value!r}")


class ClosedPort:
    """A loopback port that refuses connections: bound, never listening. While
    it is held the kernel hands the port to no bind of port 0 (how free_port
    and every test picks a server's port), so no other test's server takes
    it. port: one to hold (say a stopped server's, which the next server
    started could otherwise get and answer on); by default the kernel picks
    one. (A process that binds this very port with SO_REUSEADDR still can.)"""

    def __init__(self, port=0):
        self.sock = socket.socket()
        # a stopped server's port may still have connections in TIME_WAIT
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self.sock.bind(("127.0.0.1", port))
        except OSError as e:
            self.sock.close()
            raise RuntimeError(f"cannot hold loopback port {port}: {e}") from e
        self.port = self.sock.getsockname()[1]

    @property
    def url(self):
        return f"redis://127.0.0.1:{self.port}/"

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
