import { createPrivateKey, createPublicKey, generateKeyPairSync, randomUUID, type KeyObject } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { calculateJwkThumbprint, exportJWK, importJWK, jwtVerify, SignJWT, type JWK, type JWTPayload } from 'jose';
import type { Bus } from '../bus/bus.js';
import type { Config } from '../config/schema.js';
import { encodeRecord } from '../control/control-plane.js';
import { WatchedMap } from '../control/watched-map.js';
import type { Logger } from '../log.js';

export const audience = 'darshak-api';
export const userTokenSeconds = 24 * 3600;
export const serviceTokenSeconds = 90 * 24 * 3600;
const algorithm = 'EdDSA';
type VerifyKey = Awaited<ReturnType<typeof importJWK>>;

/** What a verified token says about its bearer (docs/api.md "Tokens"). */
export interface Principal {
  sub: string;
  tenant: string;
  role: string;
  scopes: ReadonlySet<string>;
  jti: string;
  exp: number;
}

export interface IssueInput {
  sub: string;
  tenant: string;
  role: string;
  scopes: readonly string[];
  lifetimeSeconds: number;
  jti?: string;
}

/** Load the signing key from `file`, or create one there on first start (0600: it mints every token). */
export function loadSigningKey(file: string, log: Logger): KeyObject {
  if (existsSync(file)) {
    const key = createPrivateKey(readFileSync(file));
    if (key.asymmetricKeyType !== 'ed25519') throw new Error(`${file} is a ${key.asymmetricKeyType} key; token signing needs Ed25519`);
    return key;
  }
  mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
  const { privateKey } = generateKeyPairSync('ed25519');
  writeFileSync(file, privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600, flag: 'wx' });
  chmodSync(file, 0o600);
  log.info({ file }, 'token signing key generated');
  return privateKey;
}

const stringClaim = (p: JWTPayload, name: string): string | null => {
  const v = p[name];
  return typeof v === 'string' && v.length > 0 ? v : null;
};

/**
 * Signs with this process's Ed25519 key and verifies against the public keys of every api process, which each
 * publishes to the `<prefix>_jwks` KV bucket: processes with separate data directories accept each other's tokens.
 */
export class TokenService {
  private readonly imported = new Map<string, Promise<VerifyKey>>();

  private constructor(
    private readonly privateKey: KeyObject,
    readonly kid: string,
    private readonly issuer: string,
    private readonly keys: WatchedMap<JWK>,
  ) {}

  static async open(config: Pick<Config, 'jwt_key_file' | 'data_dir' | 'public_base_url'>, bus: Bus, log: Logger): Promise<TokenService> {
    const file = config.jwt_key_file !== '' ? resolve(config.jwt_key_file) : join(resolve(config.data_dir), 'keys', 'signing-key.pem');
    const privateKey = loadSigningKey(file, log);
    const jwk = await exportJWK(createPublicKey(privateKey));
    const kid = await calculateJwkThumbprint(jwk);
    const kv = await bus.kv(bus.names.jwksBucket);
    await kv.put(kid, encodeRecord({ ...jwk, kid, alg: algorithm, use: 'sig' }));
    const keys = await WatchedMap.open<JWK>(kv, bus, log);
    return new TokenService(privateKey, kid, config.public_base_url, keys);
  }

  async issue(input: IssueInput): Promise<{ token: string; jti: string; expiresAt: Date }> {
    const now = Math.floor(Date.now() / 1000);
    const jti = input.jti ?? randomUUID();
    const exp = now + input.lifetimeSeconds;
    const token = await new SignJWT({ tenant: input.tenant, role: input.role, scope: input.scopes.join(' ') })
      .setProtectedHeader({ alg: algorithm, typ: 'JWT', kid: this.kid })
      .setSubject(input.sub)
      .setIssuer(this.issuer)
      .setAudience(audience)
      .setIssuedAt(now)
      .setNotBefore(now)
      .setExpirationTime(exp)
      .setJti(jti)
      .sign(this.privateKey);
    return { token, jti, expiresAt: new Date(exp * 1000) };
  }

  /** The claims of a token this service would accept, or null: algorithm, kid, signature, times, iss, aud, shape. */
  async verify(token: string): Promise<Principal | null> {
    try {
      const { payload } = await jwtVerify(token, (header) => this.key(header.kid), {
        algorithms: [algorithm],
        issuer: this.issuer,
        audience,
        clockTolerance: 5,
        requiredClaims: ['sub', 'exp', 'iat', 'jti', 'nbf'],
      });
      const sub = stringClaim(payload, 'sub');
      const tenant = stringClaim(payload, 'tenant');
      const role = stringClaim(payload, 'role');
      const scope = payload.scope;
      const jti = stringClaim(payload, 'jti');
      if (!sub || !tenant || !role || !jti || typeof scope !== 'string' || typeof payload.exp !== 'number') return null;
      return { sub, tenant, role, scopes: new Set(scope.split(' ').filter(Boolean)), jti, exp: payload.exp };
    } catch {
      return null;
    }
  }

  private key(kid: string | undefined): Promise<VerifyKey> {
    const jwk = kid === undefined ? undefined : this.keys.get(kid);
    if (!kid || !jwk) return Promise.reject(new Error('unknown kid'));
    let key = this.imported.get(kid);
    if (!key) {
      key = importJWK(jwk, algorithm);
      this.imported.set(kid, key);
    }
    return key;
  }

  /** The public keys every api process accepts (served at /.well-known/jwks.json). */
  jwks(): { keys: JWK[] } {
    return { keys: this.keys.values() };
  }

  stop(): void {
    this.keys.stop();
  }
}
