import { randomBytes, scryptSync } from 'node:crypto';

/** A password hash as an earlier version made it: N=2^15, r=8, p=1. */
export function olderHash(password: string): string {
  const salt = randomBytes(16);
  return `scrypt$32768$8$1$${salt.toString('base64')}$${scryptSync(password, salt, 32, { N: 32768, r: 8, p: 1, maxmem: 64 * 1024 * 1024 }).toString('base64')}`;
}
