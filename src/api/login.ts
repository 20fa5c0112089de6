import type { KV } from 'nats';
import { decodeRecord, encodeRecord, sha256Hex, type ControlPlane } from '../control/control-plane.js';
import { hashPassword, verifyPassword } from '../control/passwords.js';
import { roles, type Role } from '../control/records.js';
import { userTokenSeconds, type TokenService } from './tokens.js';

export const loginWindowMs = 15 * 60_000;
export const loginMaxFailures = 10;

export interface LoginResponse {
  access_token: string;
  token_type: 'bearer';
  expires_in: number;
  tenant_slug: string;
  user: { id: number; email: string; role: Role };
}

export type LoginOutcome =
  | { kind: 'ok'; response: LoginResponse }
  | { kind: 'invalid_credentials' }
  | { kind: 'too_many_attempts'; retryAfterSeconds: number };

/** The scopes of each role (CONTRACT §4). */
export const roleScopes: Readonly<Record<Role, readonly string[]>> = {
  owner: ['analytics:read', 'alerts:write', 'keys:manage', 'settings:write'],
  admin: ['analytics:read', 'alerts:write', 'keys:manage'],
  viewer: ['analytics:read'],
};

/**
 * Failed logins per e-mail in a KV bucket whose entries expire 15 minutes after their last write, so every api
 * process counts the same failures. The value is the failure times within the window.
 */
export class LoginFailures {
  constructor(private readonly kv: KV) {}

  private async read(key: string, now: number): Promise<{ times: number[]; revision: number }> {
    const e = await this.kv.get(key);
    if (!e || e.operation !== 'PUT') return { times: [], revision: 0 };
    return { times: decodeRecord<number[]>(e.value).filter((t) => t > now - loginWindowMs), revision: e.revision };
  }

  /** Seconds until an attempt may be made again; 0 when it may now. */
  async retryAfter(key: string, now = Date.now()): Promise<number> {
    const { times } = await this.read(key, now);
    if (times.length < loginMaxFailures) return 0;
    const oldestThatCounts = times[times.length - loginMaxFailures] as number;
    return Math.max(1, Math.ceil((oldestThatCounts + loginWindowMs - now) / 1000));
  }

  async record(key: string, now = Date.now()): Promise<void> {
    for (let attempt = 0; attempt < 10; attempt++) {
      const { times, revision } = await this.read(key, now);
      const next = [...times, now].slice(-loginMaxFailures);
      try {
        if (revision === 0) await this.kv.create(key, encodeRecord(next));
        else await this.kv.update(key, encodeRecord(next), revision);
        return;
      } catch {
        // Another process recorded a failure meanwhile: read again.
      }
    }
  }
}

/**
 * Password login. An unknown e-mail is checked against a dummy hash with the same scrypt cost and the same KV reads,
 * so the answer and its timing do not tell whether the e-mail exists.
 */
export class Login {
  private constructor(
    private readonly control: ControlPlane,
    private readonly failures: LoginFailures,
    private readonly tokens: TokenService,
    private readonly dummyHash: string,
  ) {}

  static async create(control: ControlPlane, failures: LoginFailures, tokens: TokenService): Promise<Login> {
    return new Login(control, failures, tokens, await hashPassword('dummy password that matches nothing'));
  }

  async login(email: string, password: string): Promise<LoginOutcome> {
    const key = sha256Hex(email.trim().toLowerCase());
    const retryAfterSeconds = await this.failures.retryAfter(key);
    if (retryAfterSeconds > 0) return { kind: 'too_many_attempts', retryAfterSeconds };
    const id = await this.control.findUserId(email);
    // User 0 never exists: the read is made so that both paths do the same work.
    const user = await this.control.getUser(id ?? 0);
    const matches = await verifyPassword(password, user?.password_hash ?? this.dummyHash);
    if (!user || !matches || !roles.includes(user.role)) {
      await this.failures.record(key);
      return { kind: 'invalid_credentials' };
    }
    const { token } = await this.tokens.issue({
      sub: String(user.id),
      tenant: user.tenant,
      role: user.role,
      scopes: roleScopes[user.role],
      lifetimeSeconds: userTokenSeconds,
    });
    return {
      kind: 'ok',
      response: {
        access_token: token,
        token_type: 'bearer',
        expires_in: userTokenSeconds,
        tenant_slug: user.tenant,
        user: { id: user.id, email: user.email, role: user.role },
      },
    };
  }
}
