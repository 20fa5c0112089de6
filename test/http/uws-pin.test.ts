import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import t from 'tap';
import { tryLoad } from '../../src/http/engines/uws.js';
import { uwsBinarySha256 } from '../../src/http/uws-pins.js';
import { uwsSkip } from '../helpers/engines.js';

const binary = `uws_${process.platform}_${process.arch}_${process.versions.modules}.node`;
const installed = dirname(createRequire(import.meta.url).resolve('uWebSockets.js/package.json'));

t.test('the installed binary matches its pin and loads', async (t) => {
  const r = tryLoad();
  if (!uwsBinarySha256[binary]) {
    t.match(r, { ok: false, error: /no pinned uWebSockets.js binary/ });
    return;
  }
  if (!r.ok && uwsSkip) {
    // The hash is checked before loading: it matched, and this machine cannot load the build (see helpers/engines.ts).
    t.match(r.error, new RegExp(`^${binary} does not load: `), 'it matches its pin; loading it is skipped here');
    t.comment(uwsSkip);
    return;
  }
  t.match(r, { ok: true, value: { binary, sha256: uwsBinarySha256[binary] } });
});

t.test('a binary that differs from its pin by one byte is never loaded', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'uws-pin-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  copyFileSync(join(installed, binary), join(dir, binary));
  const bytes = readFileSync(join(dir, binary));
  bytes[bytes.length - 1] = (bytes[bytes.length - 1] ?? 0) ^ 1;
  writeFileSync(join(dir, binary), bytes);
  const r = tryLoad(dir, { [binary]: uwsBinarySha256[binary] ?? 'none' });
  t.equal(r.ok, false);
  t.match(r, { error: new RegExp(`${binary} has sha256 [0-9a-f]{64}, pinned`) });
  t.match(tryLoad(dir, {}), { ok: false, error: /no pinned/ }, 'no pin for the platform: not loaded');
  t.match(tryLoad(null), { ok: false, error: /not installed/ });
});
