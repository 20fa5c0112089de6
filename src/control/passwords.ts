import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto';

// scrypt at N=2^15, r=8, p=3: one of OWASP's equivalent minimums (with N=2^17, p=1), at a quarter of its memory
// (32 MiB a hash). Parameters are stored with each hash; an older hash is replaced at its user's next sign-in.
const params = { N: 32768, r: 8, p: 3 };
const keyLength = 32;

function scryptAsync(password: string, salt: Buffer, len: number, opts: ScryptOptions): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    scrypt(password, salt, len, { ...opts, maxmem: 256 * 1024 * 1024 }, (err, key) =>
      err ? reject(err) : resolve(key),
    ),
  );
}

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await scryptAsync(password, salt, keyLength, params);
  return `scrypt$${params.N}$${params.r}$${params.p}$${salt.toString('base64')}$${key.toString('base64')}`;
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [scheme, n, r, p, salt, hash] = stored.split('$');
  if (scheme !== 'scrypt' || !n || !r || !p || !salt || !hash) return false;
  const expected = Buffer.from(hash, 'base64');
  const key = await scryptAsync(password, Buffer.from(salt, 'base64'), expected.length, {
    N: Number(n),
    r: Number(r),
    p: Number(p),
  });
  return timingSafeEqual(key, expected);
}

/** Whether a stored hash was made with other parameters than today's (then it is replaced at the next sign-in). */
export function needsRehash(stored: string): boolean {
  const [scheme, n, r, p] = stored.split('$');
  return scheme !== 'scrypt' || Number(n) !== params.N || Number(r) !== params.r || Number(p) !== params.p;
}
