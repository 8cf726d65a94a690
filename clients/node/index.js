'use strict';
// Claim pristine slots of a db-branch pool over the pool recycler's unix socket
// (docs/pools.md, "The claim protocol"). The lease is the connection: a slot is yours while
// the socket is open and goes back to be reset when it closes — release(), the process's
// exit, or a crash. No subprocess per claim.

const net = require('node:net');
const { execFileSync } = require('node:child_process');

class ClaimError extends Error {
  // exit: the exit code db-branch would have ended with (75: no ready slot, 77: not
  // allowed, 2: a bad request); hints: what to do about it.
  constructor(message, exit = 1, hints = []) {
    super(message + hints.map((h) => `\n  hint: ${h}`).join(''));
    this.name = 'ClaimError';
    this.exit = exit;
    this.hints = hints;
  }
}

const discovered = new Map();

// Where pool `pool`'s recycler listens: $DB_BRANCH_POOL_SOCKET, else what
// `db-branch --json pool status POOL` says (asked once per process).
function socketPath(pool, dbBranch = 'db-branch') {
  if (process.env.DB_BRANCH_POOL_SOCKET) return process.env.DB_BRANCH_POOL_SOCKET;
  if (!discovered.has(pool)) {
    const status = JSON.parse(execFileSync(dbBranch, ['--json', 'pool', 'status', pool]));
    if (!status.recycler) {
      // Any pool command that hands a slot out starts the recycler; this one gives it back.
      execFileSync(dbBranch, ['pool', 'run', pool, '--wait', '120s', '--', 'true']);
    }
    discovered.set(pool, status.socket);
  }
  return discovered.get(pool);
}

// One request and one reply at a time, a JSON object per line each way.
class Connection {
  constructor(socket) {
    this.socket = socket;
    this.buffered = '';
    this.waiting = [];
    this.closed = false;
    socket.setEncoding('utf8');
    socket.on('data', (chunk) => {
      this.buffered += chunk;
      let nl;
      while ((nl = this.buffered.indexOf('\n')) >= 0) {
        const line = this.buffered.slice(0, nl);
        this.buffered = this.buffered.slice(nl + 1);
        const w = this.waiting.shift();
        if (w) w.resolve(line);
      }
    });
    const fail = (err) => {
      this.closed = true;
      for (const w of this.waiting.splice(0)) {
        w.reject(err || new ClaimError("the pool's recycler closed the connection"));
      }
    };
    socket.on('close', () => fail());
    socket.on('error', (e) => fail(e));
  }

  async ask(request) {
    if (this.closed) throw new ClaimError('the connection to the pool is closed');
    const line = await new Promise((resolve, reject) => {
      this.waiting.push({ resolve, reject });
      this.socket.write(JSON.stringify(request) + '\n');
    });
    const reply = JSON.parse(line);
    if (!reply.ok) throw new ClaimError(reply.error || 'refused', reply.exit || 1, reply.hints || []);
    return reply;
  }
}

class Slot {
  constructor(connection, reply) {
    this.connection = connection;
    this.set(reply);
  }

  set(reply) {
    this.number = reply.slot;
    // The variables `db-branch pool claim --json` prints: DATABASE_URL, MYSQL_TCP_PORT, …
    this.env = reply.env;
    this.url = reply.env.DATABASE_URL;
  }

  // Reset in place (the server restarts from its clean snapshot): pristine again, same URL.
  async reset() {
    this.set(await this.connection.ask({ op: 'reset' }));
    return this;
  }

  // Hand the slot back to be recycled; closes the connection.
  async release() {
    if (this.connection.closed) return;
    await new Promise((resolve) => {
      this.connection.socket.once('close', resolve);
      this.connection.socket.end();
    });
  }
}

function connect(path) {
  return new Promise((resolve, reject) => {
    const s = net.createConnection(path);
    s.once('connect', () => resolve(s));
    s.once('error', reject);
  });
}

// Claims a pristine slot of `pool` (default $DB_BRANCH_POOL), waiting up to `waitMs` for one
// to be ready (undefined: not at all; ClaimError with exit 75). A recycler that is starting
// is waited for (up to 30 s).
async function claim({ pool = process.env.DB_BRANCH_POOL, waitMs, socket, dbBranch } = {}) {
  const path = socket || socketPath(pool, dbBranch);
  let s;
  for (const deadline = Date.now() + 30000; ; ) {
    try {
      s = await connect(path);
      break;
    } catch (e) {
      if (!['ENOENT', 'ECONNREFUSED'].includes(e.code) || Date.now() > deadline) throw e;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  const connection = new Connection(s);
  const request = { op: 'claim' };
  if (waitMs !== undefined) request.wait_ms = waitMs;
  try {
    return new Slot(connection, await connection.ask(request));
  } catch (e) {
    s.destroy();
    throw e;
  }
}

module.exports = { claim, socketPath, ClaimError, Slot };
