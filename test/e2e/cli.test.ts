import t from 'tap';
import { cli, removeNamespace, uniquePrefix } from '../helpers/env.js';

// CONTRACT §3: one JSON object on stdout and exit 0, or an error on stderr and a non-zero exit.

t.test('admin commands, as an operator runs them', async (t) => {
  const prefix = uniquePrefix();
  t.teardown(() => removeNamespace(prefix));
  const env = { NATS_PREFIX: prefix };

  const created = await cli(
    [
      'tenant',
      'create',
      '--slug',
      'star-sports',
      '--name',
      'Star Sports',
      '--plan',
      'enterprise',
      '--owner-email',
      'Owner@Star.test',
      '--owner-password',
      'long enough pw',
    ],
    env,
  );
  t.equal(created.code, 0, created.stderr);
  t.same(created.json, {
    tenant_slug: 'star-sports',
    plan: 'enterprise',
    owner: {
      id: created.json?.owner && (created.json.owner as { id: number }).id,
      email: 'Owner@Star.test',
      role: 'owner',
    },
  });
  t.type((created.json?.owner as { id: unknown }).id, 'number');
  t.equal(created.stdout.trim().split('\n').length, 1, 'one JSON object');

  const dup = await cli(
    [
      'tenant',
      'create',
      '--slug',
      'star-sports',
      '--name',
      'Again',
      '--plan',
      'free',
      '--owner-email',
      'x@star.test',
      '--owner-password',
      'long enough pw',
    ],
    env,
  );
  t.equal(dup.code, 1);
  t.equal(dup.stdout, '');
  t.match(dup.stderr, /tenant "star-sports" already exists \(already_exists\)/);

  const dupEmail = await cli(
    [
      'tenant',
      'create',
      '--slug',
      'other',
      '--name',
      'Other',
      '--plan',
      'free',
      '--owner-email',
      'owner@star.test',
      '--owner-password',
      'long enough pw',
    ],
    env,
  );
  t.equal(dupEmail.code, 1);
  t.match(dupEmail.stderr, /e-mail owner@star.test already exists/, 'e-mails are unique whatever their case');

  const admin = await cli(
    [
      'user',
      'add',
      '--tenant',
      'star-sports',
      '--email',
      'ops@star.test',
      '--password',
      'another long pw',
      '--role',
      'admin',
    ],
    env,
  );
  t.equal(admin.code, 0, admin.stderr);
  t.same(Object.keys(admin.json ?? {}).sort(), ['email', 'id', 'role']);
  t.equal(admin.json?.role, 'admin');
  t.ok((admin.json?.id as number) > (created.json?.owner as { id: number }).id, 'user ids are integers that grow');

  const key = await cli(
    ['apikey', 'create', '--tenant', 'star-sports', '--name', 'android app', '--environment', 'development'],
    env,
  );
  t.equal(key.code, 0, key.stderr);
  t.same(Object.keys(key.json ?? {}).sort(), ['created_at', 'environment', 'id', 'key', 'name', 'prefix', 'scope']);
  t.match(key.json, { name: 'android app', environment: 'development', scope: 'ingest:write' });
  t.match(String(key.json?.key), /^dk_dev_[0-9A-Za-z]{32}$/);
  t.equal(String(key.json?.key).slice(0, String(key.json?.prefix).length), key.json?.prefix);

  const list = await cli(['apikey', 'list', '--tenant', 'star-sports'], env);
  t.equal(list.code, 0);
  const keys = list.json?.api_keys as Array<Record<string, unknown>>;
  t.equal(keys.length, 1);
  t.notOk('key' in (keys[0] ?? {}) || 'key_hash' in (keys[0] ?? {}), 'never the key nor its hash');

  const updated = await cli(
    [
      'tenant',
      'update',
      '--slug',
      'star-sports',
      '--plan',
      'pro',
      '--status',
      'inactive',
      '--monthly-quota',
      '1000',
      '--rate-per-minute',
      '60',
    ],
    env,
  );
  t.equal(updated.code, 0, updated.stderr);
  t.match(updated.json, {
    tenant_slug: 'star-sports',
    plan: 'pro',
    status: 'inactive',
    monthly_quota: 1000,
    rate_per_minute: 60,
  });
  const reset = await cli(['tenant', 'update', '--slug', 'star-sports', '--monthly-quota', 'plan'], env);
  t.equal(reset.json?.monthly_quota, null, '`plan` drops the override');

  const revoked = await cli(['apikey', 'revoke', '--tenant', 'star-sports', '--id', String(key.json?.id)], env);
  t.equal(revoked.code, 0);
  t.match(revoked.json, { id: key.json?.id, revoked_at: /^\d{4}-/ });
  const again = await cli(['apikey', 'revoke', '--tenant', 'star-sports', '--id', String(key.json?.id)], env);
  t.equal(again.json?.revoked_at, revoked.json?.revoked_at, 'revoking twice keeps the first time');
});

t.test('bad input: a clear message and a non-zero exit, nothing on stdout', async (t) => {
  const prefix = uniquePrefix();
  t.teardown(() => removeNamespace(prefix));
  const env = { NATS_PREFIX: prefix };
  const cases: Array<[string[], number, RegExp]> = [
    [['tenant', 'create', '--slug', 'a'], 2, /--name is required/],
    [
      [
        'tenant',
        'create',
        '--slug',
        'BAD SLUG',
        '--name',
        'n',
        '--plan',
        'free',
        '--owner-email',
        'a@b.test',
        '--owner-password',
        'long enough pw',
      ],
      1,
      /slug must be/,
    ],
    [
      [
        'tenant',
        'create',
        '--slug',
        'ok',
        '--name',
        'n',
        '--plan',
        'gold',
        '--owner-email',
        'a@b.test',
        '--owner-password',
        'long enough pw',
      ],
      1,
      /plan must be one of free, pro, enterprise/,
    ],
    [
      [
        'tenant',
        'create',
        '--slug',
        'ok',
        '--name',
        'n',
        '--plan',
        'free',
        '--owner-email',
        'not-an-email',
        '--owner-password',
        'long enough pw',
      ],
      1,
      /email must be an e-mail address/,
    ],
    [
      [
        'tenant',
        'create',
        '--slug',
        'ok',
        '--name',
        'n',
        '--plan',
        'free',
        '--owner-email',
        'a@b.test',
        '--owner-password',
        'short',
      ],
      1,
      /password must be 8 to 1024 characters/,
    ],
    [['tenant', 'update', '--slug', 'ghost', '--plan', 'pro'], 1, /tenant "ghost" does not exist \(not_found\)/],
    [['tenant', 'update', '--slug', 'ghost'], 2, /nothing to update/],
    [
      ['tenant', 'update', '--slug', 'ghost', '--monthly-quota', '1.5'],
      2,
      /--monthly-quota must be a whole number, got "1.5"/,
    ],
    [['tenant', 'update', '--slug', 'ghost', '--monthly-quota', '-5'], 2, /'--monthly-quota' argument is ambiguous/],
    [['tenant', 'update', '--slug', 'ghost', '--status', 'paused'], 1, /status must be active or inactive/],
    [
      ['user', 'add', '--tenant', 'ghost', '--email', 'a@b.test', '--password', 'long enough pw', '--role', 'owner'],
      1,
      /tenant "ghost" does not exist/,
    ],
    [
      ['user', 'add', '--tenant', 'ghost', '--email', 'a@b.test', '--password', 'long enough pw', '--role', 'god'],
      1,
      /role must be one of owner, admin, viewer/,
    ],
    [
      ['apikey', 'create', '--tenant', 'ghost', '--name', 'k', '--environment', 'prod'],
      1,
      /environment must be one of production, staging, development/,
    ],
    [['apikey', 'revoke', '--tenant', 'ghost', '--id', 'key_x'], 1, /API key "key_x" does not exist/],
    [
      ['apikey', 'create', '--tenant', 'ghost', '--name', 'k', '--environment', 'production', '--bogus'],
      2,
      /Unknown option '--bogus'/,
    ],
    [['tenant', 'explode'], 2, /darshak tenant takes one of: create, update/],
    [['frobnicate'], 2, /unknown command "frobnicate"/],
  ];
  for (const [args, code, message] of cases) {
    const r = await cli(args, env);
    t.equal(r.code, code, args.join(' '));
    t.match(r.stderr, message, args.join(' '));
    t.equal(r.stdout, '', 'nothing on stdout');
  }
  const down = await cli(['apikey', 'list', '--tenant', 'x'], { NATS_PREFIX: prefix, NATS_URL: 'nats://127.0.0.1:1' });
  t.equal(down.code, 1);
  t.match(down.stderr, /cannot reach NATS at nats:\/\/127.0.0.1:1/);
});
