import t from 'tap';
import { hashPassword, needsRehash, verifyPassword } from '../../src/control/passwords.js';
import { olderHash } from '../helpers/passwords.js';

// Password hashes at OWASP's scrypt cost, with their parameters kept, so an older hash still verifies and is known
// to be replaced.

t.test(
  'hashes are made at N=2^15, r=8, p=3 and verify; older ones verify too and are marked for replacement',
  async (t) => {
    const hash = await hashPassword('correct horse battery');
    t.match(hash, /^scrypt\$32768\$8\$3\$/);
    t.ok(await verifyPassword('correct horse battery', hash));
    t.notOk(await verifyPassword('correct horse batterY', hash));
    t.notOk(needsRehash(hash));
    const old = olderHash('correct horse battery');
    t.ok(await verifyPassword('correct horse battery', old), 'an older hash still verifies');
    t.ok(needsRehash(old), 'and is replaced at the next sign-in');
    t.notOk(await verifyPassword('x', 'bcrypt$whatever'), 'another scheme never verifies');
  },
);
