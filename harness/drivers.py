"""Spawning and talking to the drivers of docs/driver.md.

    with Driver.start("go") as d:
        d.request({"op": "store", "kind": "memory"})

Driver.request returns the reply as a dict; Driver.request_raw returns the
reply line's exact bytes (str), which the conformance harness splices into
decision logs.
"""

import contextlib
import io
import json
import math
import os
import secrets
import subprocess
import sys
import threading

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DRIVERS_DIR = os.path.join(ROOT, "drivers")


def drivers_dir():
    """drivers/, or SLIDELIMIT_DRIVERS_DIR when set (the harnesses' own tests
    point it at fake drivers)."""
    return os.environ.get("SLIDELIMIT_DRIVERS_DIR") or DRIVERS_DIR


def escape_unencodable_output() -> None:
    """Reports may quote a vector's lone surrogate, which stdout's UTF-8
    cannot write: it is printed as its escape instead of ending the run."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")


class BeyondDouble(float):
    """A JSON number past the doubles' range (`1e400`): JSON's grammar has it,
    Python reads it as an infinity, for which JSON has no text. It keeps the
    text it was written as, and wire_json sends that."""

    text: str

    def __new__(cls, text: str) -> "BeyondDouble":
        number = super().__new__(cls, text)
        number.text = text
        return number


def json_number(text: str) -> float:
    """json.load's parse_float for vector files: a fraction or exponent form
    as Python reads it, but one past the doubles' range as BeyondDouble."""
    value = float(text)
    return BeyondDouble(text) if math.isinf(value) else value


# Stands in for a BeyondDouble while json.dumps writes the rest of a line.
_BEYOND_MARK = f"\x00beyond-double-{secrets.token_hex(8)}-"


def _mark_beyond_doubles(value, texts: dict[str, str]):
    if isinstance(value, float) and math.isinf(value):
        mark = f"{_BEYOND_MARK}{len(texts)}"
        texts[json.dumps(mark)] = getattr(value, "text", "1e400" if value > 0 else "-1e400")
        return mark
    if isinstance(value, dict):
        return {k: _mark_beyond_doubles(v, texts) for k, v in value.items()}
    if isinstance(value, list):
        return [_mark_beyond_doubles(v, texts) for v in value]
    return value


def wire_json(value) -> str:
    """One compact JSON line, UTF-8 as it is; a string holding a lone
    surrogate (a vector may: JSON's \\ud800 can carry one, UTF-8 cannot) goes
    with every non-ASCII character escaped, the only form a UTF-8 line has
    for it (docs/driver.md, "Framing"). A number past the doubles' range
    goes as it was written (BeyondDouble), not as json.dumps's `Infinity`,
    which is no JSON."""
    line = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    texts: dict[str, str] = {}
    if "Infinity" in line:
        value = _mark_beyond_doubles(value, texts)
        line = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        line = json.dumps(value, separators=(",", ":"))
    for mark, text in texts.items():
        line = line.replace(mark, text)
    return line


class DriverError(Exception):
    """The driver broke the protocol: it died, printed no line, or not JSON."""


def registered():
    """Names of the registered drivers (executables in drivers/), sorted."""
    names = []
    directory = drivers_dir()
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            names.append(name)
    return names


class Driver:
    def __init__(self, name, proc, stderr_path=None):
        self.name = name
        self._proc = proc
        self._stderr_path = stderr_path
        self._killed = False  # by this harness: its exit status is ours
        self._closed = False
        # What went wrong when the session ended (close()), None if nothing.
        self.exit_problem = None

    @classmethod
    def start(cls, name, env=None, stderr=None):
        """Starts drivers/NAME. stderr: a file object for its diagnostics
        (default: inherited)."""
        path = os.path.join(drivers_dir(), name)
        if not os.access(path, os.X_OK):
            raise DriverError(f"no driver {name!r} (have: {', '.join(registered())})")
        proc = subprocess.Popen(
            [path],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=env,
            text=True,
            encoding="utf-8",
            bufsize=1,
        )
        return cls(name, proc)

    def request_raw(self, request, timeout_s=120):
        """Sends one request; returns the reply line (without its newline)."""
        return self.send_line(wire_json(request), request.get("op"), timeout_s)

    def send_line(self, line, op=None, timeout_s=120):
        """Sends one line as it is (a test of the framing may send one that is
        no JSON); returns the reply line (without its newline)."""
        try:
            self._proc.stdin.write(line + "\n")
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError) as e:
            raise DriverError(
                f"driver {self.name} is gone ({e}); exit status {self._proc.poll()}"
            ) from e
        reply = [None]

        def read():
            reply[0] = self._proc.stdout.readline()

        # A driver that hangs must not hang the harness.
        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(timeout_s)
        if reader.is_alive():
            self.kill()
            raise DriverError(f"driver {self.name} did not answer {op} within {timeout_s} s")
        if not reply[0]:
            raise DriverError(
                f"driver {self.name} closed its output on {op}; exit status {self._proc.wait()}"
            )
        return reply[0].rstrip("\n")

    def request(self, request, timeout_s=120):
        raw = self.request_raw(request, timeout_s)
        try:
            reply = json.loads(raw)
        except ValueError as e:
            raise DriverError(
                f"driver {self.name} printed a line that is not JSON: {raw[:200]!r}"
            ) from e
        if not isinstance(reply, dict):
            raise DriverError(
                f"driver {self.name} printed a reply that is not an object: {raw[:200]!r}"
            )
        if reply.get("error") == "protocol":
            raise DriverError(
                f"driver {self.name} refused {request.get('op')}: {reply.get('message')}"
            )
        return reply

    def close(self):
        """Ends the session as docs/driver.md says: `exit`, answered with
        {"ok":true}, then exit status 0. Returns what went wrong instead
        (also kept in exit_problem), None when nothing did. It never raises,
        so a finally block may call it; a driver this harness killed (a
        request timed out) has no exit to judge."""
        if self._closed:
            return self.exit_problem
        self._closed = True
        problem = None
        if self._proc.poll() is None:
            try:
                reply = json.loads(self.send_line('{"op":"exit"}', "exit", timeout_s=30))
                if not (isinstance(reply, dict) and reply.get("ok") is True):
                    problem = f"answered exit with {reply!r}, not {{'ok': True}}"
            except (DriverError, ValueError) as e:
                problem = f"did not answer exit: {e}"
            with contextlib.suppress(BrokenPipeError, OSError):
                self._proc.stdin.close()
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()
                problem = problem or "did not end within 30 s of exit; killed"
        if problem is None and not self._killed and self._proc.returncode != 0:
            problem = f"ended with exit status {self._proc.returncode}, not 0"
        self._release()
        self.exit_problem = problem
        return problem

    def _release(self):
        """Closes our ends of the pipes (a driver that died left them open)."""
        for pipe in (self._proc.stdin, self._proc.stdout):
            with contextlib.suppress(BrokenPipeError, OSError):
                pipe.close()

    def kill(self):
        if self._proc.poll() is None:
            self._killed = True
            self._proc.kill()
            self._proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
