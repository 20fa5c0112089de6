import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { loadSigningKey } from '../../src/api/tokens.js';
import { createLogger } from '../../src/log.js';

const dir = mkdtempSync(join(tmpdir(), 'darshak-keys-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const log = createLogger('silent');

t.test('a signing key is generated once, private to its owner, and loaded again unchanged', async (t) => {
  const file = join(dir, 'keys', 'signing-key.pem');
  const first = loadSigningKey(file, log);
  t.equal(first.asymmetricKeyType, 'ed25519');
  t.equal(statSync(file).mode & 0o777, 0o600, 'mode 0600');
  t.equal(statSync(join(dir, 'keys')).mode & 0o777, 0o700, 'its directory 0700');
  const pem = readFileSync(file, 'utf8');
  t.match(pem, /^-----BEGIN PRIVATE KEY-----/);
  const again = loadSigningKey(file, log);
  t.same(
    again.export({ type: 'pkcs8', format: 'der' }),
    first.export({ type: 'pkcs8', format: 'der' }),
    'the same key on the next start',
  );
});

t.test('a given key that is not Ed25519 is refused with a message', async (t) => {
  const file = join(dir, 'rsa.pem');
  writeFileSync(
    file,
    generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }),
  );
  t.throws(() => loadSigningKey(file, log), /rsa key; token signing needs Ed25519/);
  const junk = join(dir, 'junk.pem');
  writeFileSync(junk, 'not a key');
  t.throws(() => loadSigningKey(junk, log));
});
