// A tenant for a simulated audience, made through the darshak CLI as an operator makes one (NATS_URL and
// NATS_PREFIX in `env` as the service's).

import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import { mainJs } from '../host.js';

export interface Account {
  tenant: string;
  apiKey: string;
  email: string;
  password: string;
}

/** A new enterprise tenant `<slugBase>-<random>`, its owner and a production ingest key. */
export async function provision(
  slugBase: string,
  name: string,
  env: NodeJS.ProcessEnv = process.env,
): Promise<Account> {
  const run = async (args: string[]): Promise<Record<string, unknown>> => {
    const { stdout } = await promisify(execFile)(process.execPath, [mainJs, ...args], { env });
    return JSON.parse(stdout) as Record<string, unknown>;
  };
  const tenant = `${slugBase}-${randomBytes(3).toString('hex')}`;
  const email = `owner@${tenant}.example`;
  const password = randomBytes(12).toString('base64url');
  await run([
    'tenant',
    'create',
    '--slug',
    tenant,
    '--name',
    name,
    '--plan',
    'enterprise',
    '--owner-email',
    email,
    // The = form: a random password may begin with a dash, which would read as an option.
    `--owner-password=${password}`,
  ]);
  const key = await run(['apikey', 'create', '--tenant', tenant, '--name', 'simulator', '--environment', 'production']);
  return { tenant, apiKey: String(key.key), email, password };
}
