import type { Writable } from 'node:stream';
import { configKeys, type Config } from '../config/schema.js';
import { natsAuthConfig, natsRoles, newNatsPassword, passwordVariable } from '../bus/permissions.js';
import { flags, UsageError } from './args.js';

/**
 * `darshak nats-auth [--prefix P]`: nats-server's `authorization` block with a least-privilege user per role.
 * `--passwords`: a `.env` of new random passwords for those users, as docker-compose.yml reads them.
 */
export function runNatsAuth(argv: string[], config: Pick<Config, 'nats_prefix'>, out: Writable): void {
  const f = flags(argv, { prefix: { type: 'string' }, passwords: { type: 'boolean' } });
  const prefix = f.prefix ?? config.nats_prefix;
  const pattern = configKeys.nats_prefix.pattern ?? '';
  if (!new RegExp(pattern).test(prefix))
    throw new UsageError(`--prefix must match ${pattern}, got ${JSON.stringify(prefix)}`);
  if (f.passwords) {
    for (const user of [...natsRoles, 'admin'] as const) out.write(`${passwordVariable(user)}=${newNatsPassword()}\n`);
    return;
  }
  out.write(natsAuthConfig(prefix));
}
