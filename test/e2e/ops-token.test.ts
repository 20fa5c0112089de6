import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { call } from '../helpers/api.js';
import { startService } from '../helpers/env.js';

// OPS_TOKEN: /readyz and /metrics of both listeners for operators only; /healthz stays open for liveness probes.

const dataDir = mkdtempSync(join(tmpdir(), 'darshak-ops-token-'));
t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
const opsToken = 'ops-secret-0123456789';
const svc = await startService({ data_dir: dataDir, ops_token: opsToken }, 'ingest,api');
t.teardown(() => svc.stop());
const base = `http://127.0.0.1:${svc.started.services.listeners.get('base')!.port}`;

for (const [listener, url] of [
  ['api', base],
  ['ingest', svc.ingestUrl],
] as const) {
  t.test(`${listener} listener: /readyz and /metrics need the operators' token; /healthz does not`, async (t) => {
    t.equal((await call(url, 'GET', '/healthz')).status, 200, '/healthz is open');
    for (const path of ['/readyz', '/metrics']) {
      const without = await call(url, 'GET', path);
      t.match(without, { status: 401, json: { error: { code: 'unauthorized' } } }, `${path} without the token`);
      t.equal(without.headers.get('www-authenticate'), 'Bearer realm="darshak-ops"');
      t.equal(
        (await call(url, 'GET', path, { headers: { authorization: `Bearer ${opsToken}x` } })).status,
        401,
        `${path} with a wrong one`,
      );
      t.equal(
        (await call(url, 'GET', path, { headers: { authorization: `Bearer ${opsToken}` } })).status,
        200,
        `${path} with it`,
      );
    }
  });
}
