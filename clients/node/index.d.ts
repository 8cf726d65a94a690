export interface ClaimOptions {
  /** Pool name (default: $DB_BRANCH_POOL). */
  pool?: string;
  /** How long to wait for a ready slot, in ms (default: not at all). */
  waitMs?: number;
  /** The recycler's socket (default: $DB_BRANCH_POOL_SOCKET, or `db-branch pool status`'s). */
  socket?: string;
  /** The db-branch command (default: "db-branch"). */
  dbBranch?: string;
}

export class ClaimError extends Error {
  exit: number;
  hints: string[];
}

export class Slot {
  number: number;
  env: Record<string, string>;
  url: string;
  reset(): Promise<Slot>;
  release(): Promise<void>;
}

export function claim(options?: ClaimOptions): Promise<Slot>;
export function socketPath(pool: string, dbBranch?: string): string;
