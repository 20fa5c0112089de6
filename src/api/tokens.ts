import {
  createHmac,
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  randomBytes,
  randomUUID,
  timingSafeEqual,
  type KeyObject,
} from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { calculateJwkThumbprint, exportJWK, importJWK, jwtVerify, SignJWT, type JWK, type JWTPayload } from 'jose';
import type { Bus } from '../bus/bus.js';
import type { Config } from '../config/schema.js';
import { encodeRecord } from '../control/kv-records.js';
import { WatchedMap } from '../control/watched-map.js';
import type { Logger } from '../log.js';
import { createPrivateFile } from '../private-file.js';

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
  /** The user's session version when the token was issued (the `sv` claim; 0 for service accounts). */
  sv: number;
}

export interface IssueInput {
  sub: string;
  tenant: string;
  role: string;
  scopes: readonly string[];
  lifetimeSeconds: number;
  jti?: string;
  /** A user's session version (UserRecord.session_version). */
  sv?: number;
}

/** Load the signing key from `file`, or create one there on first start (0600: it mints every token). */
export function loadSigningKey(file: string, log: Logger): KeyObject {
  if (existsSync(file)) {
    const key = createPrivateKey(readFileSync(file));
    if (key.asymmetricKeyType !== 'ed25519')
      throw new Error(`${file} is a ${key.asymmetricKeyType} key; token signing needs Ed25519`);
    return key;
  }
  const { privateKey } = generateKeyPairSync('ed25519');
  createPrivateFile(file, privateKey.export({ type: 'pkcs8', format: 'pem' }).toString());
  log.info({ file }, 'token signing key generated');
  return privateKey;
}

/**
 * The HMAC key that vouches for api processes' public keys: `jwks_secret`, or one generated (0600) on first start. It
 * never goes to NATS, so a write to the jwks bucket alone adds no key anyone accepts.
 */
function loadJwksSecret(config: Pick<Config, 'jwks_secret' | 'data_dir'>, log: Logger): Buffer {
  if (config.jwks_secret !== '') return Buffer.from(config.jwks_secret, 'utf8');
  const file = join(resolve(config.data_dir), 'keys', 'jwks-secret');
  if (!existsSync(file)) {
    createPrivateFile(file, randomBytes(32).toString('base64url'));
    log.info({ file }, 'jwks secret generated');
  }
  return Buffer.from(readFileSync(file, 'utf8').trim(), 'utf8');
}

/** A public key as the jwks bucket holds it: the JWK and the HMAC of what verifying with it depends on. */
interface VouchedKey {
  jwk: JWK;
  mac: string;
}

const keyMac = (secret: Buffer, jwk: JWK): Buffer =>
  createHmac('sha256', secret)
    .update(JSON.stringify([jwk.kid, jwk.kty, jwk.crv, jwk.x, jwk.alg]))
    .digest();

const stringClaim = (p: JWTPayload, name: string): string | null => {
  const v = p[name];
  return typeof v === 'string' && v.length > 0 ? v : null;
};

/**
 * Signs with this process's Ed25519 key and verifies against the public keys of every api process, which each
 * publishes to the `<prefix>_jwks` KV bucket: processes with separate data directories accept each other's tokens.
 * A key counts only with a valid HMAC under the jwks secret, which stays out of NATS.
 */
export class TokenService {
  private readonly imported = new Map<string, Promise<VerifyKey>>();

  private constructor(
    private readonly privateKey: KeyObject,
    readonly kid: string,
    private readonly issuer: string,
    private readonly keys: WatchedMap<VouchedKey>,
    private readonly secret: Buffer,
    private readonly log: Logger,
  ) {}

  static async open(
    config: Pick<Config, 'jwt_key_file' | 'jwks_secret' | 'data_dir' | 'public_base_url'>,
    bus: Bus,
    log: Logger,
  ): Promise<TokenService> {
    const file =
      config.jwt_key_file !== ''
        ? resolve(config.jwt_key_file)
        : join(resolve(config.data_dir), 'keys', 'signing-key.pem');
    const privateKey = loadSigningKey(file, log);
    const secret = loadJwksSecret(config, log);
    const exported = await exportJWK(createPublicKey(privateKey));
    const kid = await calculateJwkThumbprint(exported);
    const jwk: JWK = { ...exported, kid, alg: algorithm, use: 'sig' };
    const kv = await bus.kv(bus.names.jwksBucket);
    await kv.put(kid, encodeRecord({ jwk, mac: keyMac(secret, jwk).toString('base64url') } satisfies VouchedKey));
    const keys = await WatchedMap.open<VouchedKey>(kv, bus, log);
    return new TokenService(privateKey, kid, config.public_base_url, keys, secret, log.child({ module: 'tokens' }));
  }

  async issue(input: IssueInput): Promise<{ token: string; jti: string; expiresAt: Date }> {
    const now = Math.floor(Date.now() / 1000);
    const jti = input.jti ?? randomUUID();
    const exp = now + input.lifetimeSeconds;
    const claims = {
      tenant: input.tenant,
      role: input.role,
      scope: input.scopes.join(' '),
      ...(input.sv === undefined ? {} : { sv: input.sv }),
    };
    const token = await new SignJWT(claims)
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
      const sv = payload.sv ?? 0;
      if (
        !sub ||
        !tenant ||
        !role ||
        !jti ||
        typeof scope !== 'string' ||
        typeof payload.exp !== 'number' ||
        !Number.isSafeInteger(sv)
      )
        return null;
      return {
        sub,
        tenant,
        role,
        scopes: new Set(scope.split(' ').filter(Boolean)),
        jti,
        exp: payload.exp,
        sv: sv as number,
      };
    } catch {
      return null;
    }
  }

  /** The entry's JWK if the jwks secret vouches for it under this kid. */
  private vouched(kid: string, entry: VouchedKey | undefined): JWK | null {
    if (
      !entry ||
      typeof entry.jwk !== 'object' ||
      entry.jwk === null ||
      entry.jwk.kid !== kid ||
      typeof entry.mac !== 'string'
    )
      return null;
    const mac = Buffer.from(entry.mac, 'base64url');
    const want = keyMac(this.secret, entry.jwk);
    return mac.length === want.length && timingSafeEqual(mac, want) ? entry.jwk : null;
  }

  private key(kid: string | undefined): Promise<VerifyKey> {
    if (!kid) return Promise.reject(new Error('no kid'));
    const entry = this.keys.get(kid);
    const jwk = this.vouched(kid, entry);
    if (!jwk) {
      if (entry) this.log.warn({ kid }, 'token refused: its key is in the jwks bucket without a valid signature');
      return Promise.reject(new Error('unknown kid'));
    }
    let key = this.imported.get(kid);
    if (!key) {
      key = importJWK(jwk, algorithm);
      this.imported.set(kid, key);
    }
    return key;
  }

  /** The public keys every api process accepts (served at /.well-known/jwks.json). */
  jwks(): { keys: JWK[] } {
    const keys: JWK[] = [];
    for (const [kid, entry] of this.keys.entries()) {
      const jwk = this.vouched(kid, entry);
      if (jwk) keys.push(jwk);
    }
    return { keys };
  }

  stop(): void {
    this.keys.stop();
  }
}
