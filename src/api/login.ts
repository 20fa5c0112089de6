import type { KV } from 'nats';
import type { ControlPlane } from '../control/control-plane.js';
import { decodeRecord, encodeRecord, sha256Hex } from '../control/kv-records.js';
import { hashPassword, needsRehash, verifyPassword } from '../control/passwords.js';
import { roles, type Role, type UserRecord } from '../control/records.js';
import { clientNetwork } from '../http/address.js';
import { fail, ok, type Result } from '../result.js';
import { userTokenSeconds, type TokenService } from './tokens.js';

export const loginWindowMs = 15 * 60_000;
/**
 * Failed logins per account from one client network (an IPv4 address, an IPv6 /64) before each further attempt must
 * wait: 1 s after the last, then 2, 4, … up to the window. A progressive delay, not a lockout: the user who mistyped
 * waits seconds, a guesser gets about a dozen tries per window.
 */
export const loginFreeFailures = 5;
/** Failed logins per account from every network together: distributed guessing stays bounded. */
export const loginMaxPerAccount = 100;
/** Failed logins per client network over every account: one password tried on many accounts. */
export const loginMaxPerNetwork = 50;
/** Password hashes (scrypt, 32 MiB each) under way at once in one process; others wait their turn. */
export const loginConcurrentHashes = 2;

export interface LoginResponse {
  access_token: string;
  token_type: 'bearer';
  expires_in: number;
  tenant_slug: string;
  user: { id: number; email: string; role: Role };
}

/** Why a login or a password change did not succeed. */
export type LoginRefusal =
  | { kind: 'invalid_credentials' }
  | { kind: 'tenant_inactive' }
  | { kind: 'too_many_attempts'; retryAfterSeconds: number };

export type LoginOutcome = Result<LoginResponse, LoginRefusal>;

/** The scopes of each role (CONTRACT §4). */
export const roleScopes: Readonly<Record<Role, readonly string[]>> = {
  owner: ['analytics:read', 'alerts:write', 'keys:manage', 'settings:write'],
  admin: ['analytics:read', 'alerts:write', 'keys:manage'],
  viewer: ['analytics:read'],
};

/**
 * Login attempts in a KV bucket whose entries expire 15 minutes after their last write, so every api process counts
 * the same attempts. A value is the times of the attempts within the window. An attempt is reserved under each of its
 * keys by compare-and-set before its password is hashed, so attempts sent at once cannot all pass the limit, and
 * given back when it succeeds: the limits count failures.
 */
export class LoginAttempts {
  constructor(private readonly kv: KV) {}

  private async read(key: string, now: number): Promise<{ times: number[]; revision: number }> {
    const e = await this.kv.get(key);
    if (!e || e.operation !== 'PUT') return { times: [], revision: 0 };
    return { times: decodeRecord<number[]>(e.value).filter((t) => t > now - loginWindowMs), revision: e.revision };
  }

  /** Write `times` if the entry is still at `revision`; false when another process changed it meanwhile. */
  private async write(key: string, times: number[], revision: number): Promise<boolean> {
    try {
      if (revision === 0) await this.kv.create(key, encodeRecord(times));
      else await this.kv.update(key, encodeRecord(times), revision);
      return true;
    } catch (err) {
      if (/wrong last sequence|key exists/i.test((err as Error).message)) return false;
      throw err;
    }
  }

  /**
   * Reserve an attempt at `now` under every key, in order: 0 when all took it, else the seconds until the first key
   * that refuses has room (the keys before it keep theirs: a refused attempt still counts against them). A key is
   * `max` attempts per window, or progressive: past `free` attempts each must wait twice as long after the last.
   */
  async reserve(
    keys: ReadonlyArray<readonly [key: string, limit: { max: number } | { free: number }]>,
    now = Date.now(),
  ): Promise<number> {
    for (const [key, limit] of keys) {
      for (;;) {
        const { times, revision } = await this.read(key, now);
        const wait = 'max' in limit ? this.fullFor(times, limit.max, now) : this.delayFor(times, limit.free, now);
        if (wait > 0) return wait;
        // A progressive key needs its last few times only: past about 15 of them the delay is the whole window.
        if (await this.write(key, [...times, now].slice('max' in limit ? -limit.max : -32), revision)) break;
      }
    }
    return 0;
  }

  /** Seconds until the window of a key with `max` attempts has room, or 0. */
  private fullFor(times: readonly number[], max: number, now: number): number {
    if (times.length < max) return 0;
    const oldestThatCounts = times[times.length - max] as number;
    return Math.max(1, Math.ceil((oldestThatCounts + loginWindowMs - now) / 1000));
  }

  /** Seconds until the next attempt of a progressive key is allowed, or 0. */
  private delayFor(times: readonly number[], free: number, now: number): number {
    if (times.length < free) return 0;
    const until = (times[times.length - 1] as number) + Math.min(loginWindowMs, 1000 * 2 ** (times.length - free));
    return until > now ? Math.max(1, Math.ceil((until - now) / 1000)) : 0;
  }

  /** Give back the attempt reserved at `at` under each key (a login that succeeded). */
  async release(keys: readonly string[], at: number, now = Date.now()): Promise<void> {
    for (const key of keys) await this.amend(key, at, now, (times, i) => times.filter((_, j) => j !== i));
  }

  /**
   * Date the failed attempt reserved at `at` from its answer, `now`: a delay runs from the last failure, so a check
   * slowed down (a loaded server, hashes queued) does not use the delay up before its client hears of it. It moves
   * to the end: every other time was reserved before now, and the delay reads the last.
   */
  async settle(key: string, at: number, now = Date.now()): Promise<void> {
    await this.amend(key, at, now, (times, i) => [...times.filter((_, j) => j !== i), now]);
  }

  /** Rewrite a key's times once its attempt reserved at `at` is found, as `edit` says; retried on a concurrent write. */
  private async amend(
    key: string,
    at: number,
    now: number,
    edit: (times: number[], i: number) => number[],
  ): Promise<void> {
    for (let tries = 0; tries < 10; tries++) {
      const { times, revision } = await this.read(key, now);
      const i = times.indexOf(at);
      if (i < 0 || (await this.write(key, edit(times, i), revision))) return;
    }
  }
}

/** At most `size` holders at once; the others wait in arrival order. */
class Semaphore {
  private free: number;
  private readonly waiting: Array<() => void> = [];

  constructor(size: number) {
    this.free = size;
  }

  async run<T>(work: () => Promise<T>): Promise<T> {
    if (this.free > 0) this.free--;
    else await new Promise<void>((resolve) => this.waiting.push(resolve));
    try {
      return await work();
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.free++;
    }
  }
}

/**
 * Password login. An unknown e-mail is checked against a dummy hash with the same scrypt cost and the same KV reads,
 * so the answer and its timing do not tell whether the e-mail exists.
 */
export class Login {
  private readonly hashing = new Semaphore(loginConcurrentHashes);

  private constructor(
    private readonly control: ControlPlane,
    private readonly attempts: LoginAttempts,
    private readonly tokens: TokenService,
    private readonly suspended: (tenant: string) => boolean,
    private readonly dummyHash: string,
  ) {}

  static async create(
    control: ControlPlane,
    attempts: LoginAttempts,
    tokens: TokenService,
    suspended: (tenant: string) => boolean,
  ): Promise<Login> {
    return new Login(control, attempts, tokens, suspended, await hashPassword('dummy password that matches nothing'));
  }

  async login(email: string, password: string, client: string): Promise<LoginOutcome> {
    const checked = await this.check(email, password, client);
    if (!checked.ok) return checked;
    // Told only to who knows the password: a suspended tenant's users get no token.
    if (this.suspended(checked.value.tenant)) return fail({ kind: 'tenant_inactive' });
    return ok(await this.answer(checked.value));
  }

  /**
   * A signed-in user's new password: the current one is checked under the same limits as a login, then every token
   * issued before is refused (session version) and a new one answered.
   */
  async changePassword(userId: number, current: string, next: string, client: string): Promise<LoginOutcome> {
    const user = await this.control.users.get(userId);
    if (!user) return fail({ kind: 'invalid_credentials' });
    const checked = await this.check(user.email, current, client);
    if (!checked.ok) return checked;
    const updated = await this.control.users.setPassword(userId, next);
    return updated ? ok(await this.answer(updated)) : fail({ kind: 'invalid_credentials' });
  }

  /**
   * The user whose e-mail and password these are, the attempt counted against the limits first (docs/api.md
   * "Login"). The tight limit is per account and client network (`client` is the caller's address), so that a
   * stranger who knows an e-mail locks it out of their own network only; wider ones bound guessing spread over
   * networks and one network spraying many accounts.
   */
  private async check(email: string, password: string, client: string): Promise<Result<UserRecord, LoginRefusal>> {
    const account = sha256Hex(email.trim().toLowerCase());
    const network = clientNetwork(client);
    const delayed = `c.${sha256Hex(`${account}\n${network}`)}`;
    const keys = [
      [`n.${sha256Hex(network)}`, { max: loginMaxPerNetwork }],
      [`a.${account}`, { max: loginMaxPerAccount }],
      [delayed, { free: loginFreeFailures }],
    ] as const;
    const at = Date.now();
    const retryAfterSeconds = await this.attempts.reserve(keys, at);
    if (retryAfterSeconds > 0) return fail({ kind: 'too_many_attempts', retryAfterSeconds });
    const id = await this.control.users.findId(email);
    // User 0 never exists: the read is made so that both paths do the same work.
    const user = await this.control.users.get(id ?? 0);
    const matches = await this.hashing.run(() => verifyPassword(password, user?.password_hash ?? this.dummyHash));
    if (!user || !matches || !roles.includes(user.role)) {
      await this.attempts.settle(delayed, at);
      return fail({ kind: 'invalid_credentials' });
    }
    if (needsRehash(user.password_hash))
      await this.hashing.run(() => this.control.users.rehashPassword(user.id, user.password_hash, password));
    await this.attempts.release(
      keys.map(([key]) => key),
      at,
    );
    return ok(user);
  }

  private async answer(user: UserRecord): Promise<LoginResponse> {
    const { token } = await this.tokens.issue({
      sub: String(user.id),
      tenant: user.tenant,
      role: user.role,
      scopes: roleScopes[user.role],
      lifetimeSeconds: userTokenSeconds,
      sv: user.session_version ?? 0,
    });
    return {
      access_token: token,
      token_type: 'bearer',
      expires_in: userTokenSeconds,
      tenant_slug: user.tenant,
      user: { id: user.id, email: user.email, role: user.role },
    };
  }
}
