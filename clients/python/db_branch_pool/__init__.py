"""Claim pristine slots of a db-branch pool over the pool recycler's unix socket.

The lease is the connection: a slot is yours while the connection is open and goes back to
be reset when it closes — when you call ``release()``/``close()``, when the process exits,
or when it crashes. No subprocess per claim; the protocol is in docs/pools.md, "The claim
protocol".

    from db_branch_pool import claim
    with claim("ci") as slot:
        connect(slot.url)      # or slot.env["MYSQL_TCP_PORT"], …
        slot.reset()           # pristine again, same URL
"""

import json
import os
import socket
import subprocess
import time

__all__ = ["ClaimError", "Slot", "claim", "socket_path"]

_DISCOVERED = {}


class ClaimError(Exception):
    """The recycler refused: ``exit`` is the exit code db-branch would have ended with (75:
    no ready slot, 77: not allowed, 2: a bad request), ``hints`` what to do about it."""

    def __init__(self, message, exit=1, hints=()):
        super().__init__(message)
        self.exit = exit
        self.hints = list(hints)

    def __str__(self):
        text = self.args[0]
        for h in self.hints:
            text += "\n  hint: " + h
        return text


def socket_path(pool, db_branch="db-branch"):
    """Where pool ``pool``'s recycler listens: ``$DB_BRANCH_POOL_SOCKET`` when set, else
    what ``db-branch --json pool status POOL`` says (asked once per process)."""
    explicit = os.environ.get("DB_BRANCH_POOL_SOCKET")
    if explicit:
        return explicit
    if pool not in _DISCOVERED:
        out = subprocess.run(
            [db_branch, "--json", "pool", "status", pool],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        status = json.loads(out)
        if not status.get("recycler"):
            # Any pool command starts it; status only looks. A claim through the command
            # starts it and hands the slot straight back.
            subprocess.run(
                [db_branch, "pool", "run", pool, "--wait", "120s", "--", "true"],
                check=True,
                capture_output=True,
            )
            wait_for_socket(status["socket"])
        _DISCOVERED[pool] = status["socket"]
    return _DISCOVERED[pool]


class Slot:
    """A claimed slot: ``env`` holds the variables ``db-branch pool claim --json`` prints
    (DATABASE_URL, MYSQL_HOST, MYSQL_TCP_PORT, MYSQL_USER, MYSQL_PWD, …)."""

    def __init__(self, conn, reply):
        self._conn = conn
        self._file = conn.makefile("rwb")
        self._set(reply)

    def _set(self, reply):
        self.number = reply["slot"]
        self.env = reply["env"]
        self.url = self.env["DATABASE_URL"]

    def _ask(self, request):
        return _exchange(self._file, request)

    def reset(self):
        """Reset the slot in place (the server restarts from its clean snapshot): pristine
        again, with the same connection details. Returns when it serves."""
        self._set(self._ask({"op": "reset"}))
        return self

    def release(self):
        """Hand the slot back to be recycled; closes the connection."""
        self.close()

    def close(self):
        if self._conn is not None:
            try:
                self._file.close()
            finally:
                self._conn.close()
                self._conn = None

    @property
    def closed(self):
        return self._conn is None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return "Slot(%r, %r)" % (self.number, self.url)


def _exchange(f, request):
    f.write(json.dumps(request).encode() + b"\n")
    f.flush()
    line = f.readline()
    if not line:
        raise ClaimError("the pool's recycler closed the connection without a reply")
    reply = json.loads(line)
    if not reply.get("ok"):
        raise ClaimError(
            reply.get("error", "refused"), reply.get("exit", 1), reply.get("hints", ())
        )
    return reply


def claim(pool=None, wait=None, socket_file=None, db_branch="db-branch"):
    """Claim a pristine slot of ``pool`` (default ``$DB_BRANCH_POOL``), waiting up to
    ``wait`` seconds for one to be ready (None: not at all; ClaimError with exit 75)."""
    pool = pool or os.environ.get("DB_BRANCH_POOL")
    path = socket_file or socket_path(pool, db_branch)
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
        request = {"op": "claim"}
        if wait is not None:
            request["wait_ms"] = int(wait * 1000)
        f = conn.makefile("rwb")
        reply = _exchange(f, request)
        f.close()
    except BaseException:
        conn.close()
        raise
    return Slot(conn, reply)


def wait_for_socket(path, timeout=30.0):
    """Waits until something listens on ``path`` (a recycler that is starting)."""
    deadline = time.monotonic() + timeout
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(path)
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
        finally:
            s.close()
