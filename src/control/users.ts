import type { KV } from 'nats';
import { hashPassword } from './passwords.js';
import { check, ControlError, decodeRecord, encodeRecord, readAll, sha256Hex } from './kv-records.js';
import { roles, type Role, type TenantRecord, type UserRecord } from './records.js';

// Deliberately loose: one @, no spaces, a dot in the domain. Deliverability is the mail server's business.
const emailPattern = /^[^\s@]{1,64}@[^\s@]+\.[^\s@]+$/;

const encoder = new TextEncoder();
const decoder = new TextDecoder();

export interface UserView {
  id: number;
  email: string;
  role: Role;
}

function checkPassword(password: string): void {
  check(
    typeof password === 'string' && password.length >= 8 && password.length <= 1024,
    'password must be 8 to 1024 characters',
  );
}

export function checkCredentials(email: string, password: string): void {
  check(
    typeof email === 'string' && emailPattern.test(email) && email.length <= 254,
    'email must be an e-mail address',
  );
  checkPassword(password);
}

/**
 * Users in the users bucket: `user.<id>` records, `email.<sha256>` to find an id by e-mail, and `seq`, the last id
 * given. Watched by every api process (sign-outs take effect everywhere).
 */
export class UserStore {
  constructor(
    readonly kv: KV,
    private readonly requireTenant: (slug: string) => Promise<TenantRecord>,
  ) {}

  /** E-mail addresses of a tenant's owners (who hear about a disabled webhook endpoint). */
  async ownerEmails(tenant: string): Promise<string[]> {
    const all = await readAll<Partial<UserRecord>>(this.kv);
    return all
      .filter(
        (u) =>
          typeof u === 'object' &&
          u !== null &&
          u.tenant === tenant &&
          u.role === 'owner' &&
          typeof u.email === 'string',
      )
      .map((u) => u.email as string);
  }

  private emailKey(email: string): string {
    return `email.${sha256Hex(email.trim().toLowerCase())}`;
  }

  async findId(email: string): Promise<number | null> {
    const e = await this.kv.get(this.emailKey(email));
    return e && e.operation === 'PUT' ? decodeRecord<{ id: number }>(e.value).id : null;
  }

  async get(id: number): Promise<UserRecord | null> {
    const e = await this.kv.get(`user.${id}`);
    return e && e.operation === 'PUT' ? decodeRecord<UserRecord>(e.value) : null;
  }

  /** Change a user's record by compare-and-set, retrying on a concurrent write; null when there is no such user. */
  private async update(id: number, change: (u: UserRecord) => UserRecord): Promise<UserRecord | null> {
    for (;;) {
      const e = await this.kv.get(`user.${id}`);
      if (!e || e.operation !== 'PUT') return null;
      const next = change(decodeRecord<UserRecord>(e.value));
      try {
        await this.kv.update(`user.${id}`, encodeRecord(next), e.revision);
        return next;
      } catch (err) {
        if (!/wrong last sequence/i.test((err as Error).message)) throw err;
      }
    }
  }

  /**
   * Sign a user out everywhere: every token issued before carries the old session version and is refused by every
   * api process within about a second (the users bucket is watched).
   */
  async signOutEverywhere(id: number): Promise<UserRecord | null> {
    return this.update(id, (u) => ({ ...u, session_version: (u.session_version ?? 0) + 1 }));
  }

  /**
   * Replace a hash made with older parameters, after its password was verified, unless the record changed meanwhile
   * (a password change wins). Tokens stay valid: nothing about the user changed.
   */
  async rehashPassword(id: number, verifiedHash: string, password: string): Promise<void> {
    const hash = await hashPassword(password);
    await this.update(id, (u) => (u.password_hash === verifiedHash ? { ...u, password_hash: hash } : u));
  }

  /** A new password, and every token issued before it refused (docs/api.md "Signing out"). */
  async setPassword(id: number, password: string): Promise<UserRecord | null> {
    checkPassword(password);
    const hash = await hashPassword(password);
    return this.update(id, (u) => ({ ...u, password_hash: hash, session_version: (u.session_version ?? 0) + 1 }));
  }

  private async nextId(): Promise<number> {
    for (;;) {
      const e = await this.kv.get('seq');
      const next = e && e.operation === 'PUT' ? Number(decoder.decode(e.value)) + 1 : 1;
      try {
        if (e) await this.kv.update('seq', encoder.encode(String(next)), e.revision);
        else await this.kv.create('seq', encoder.encode(String(next)));
        return next;
      } catch {
        // Lost a race for this id: take the next one.
      }
    }
  }

  async add(input: { tenant: string; email: string; password: string; role: Role }): Promise<UserView> {
    check(roles.includes(input.role), `role must be one of ${roles.join(', ')}`);
    checkCredentials(input.email, input.password);
    await this.requireTenant(input.tenant);
    const email = input.email.trim();
    const id = await this.nextId();
    try {
      await this.kv.create(this.emailKey(email), encodeRecord({ id }));
    } catch {
      throw new ControlError('already_exists', `a user with e-mail ${email} already exists`);
    }
    const user: UserRecord = {
      id,
      tenant: input.tenant,
      email,
      role: input.role,
      password_hash: await hashPassword(input.password),
      created_at: new Date().toISOString(),
    };
    await this.kv.put(`user.${id}`, encodeRecord(user));
    return { id, email, role: user.role };
  }
}
