import { readFileSync } from 'node:fs';
import { credsAuthenticator, nkeyAuthenticator, type ConnectionOptions } from 'nats';
import type { Config } from '../config/schema.js';
import { isLoopbackUrl, readLocalCredentials } from './local-server.js';
import { inboxPrefix } from './permissions.js';

export type NatsAccess = Pick<Config, 'nats_url'> &
  Partial<
    Pick<
      Config,
      | 'data_dir'
      | 'nats_user'
      | 'nats_password'
      | 'nats_token'
      | 'nats_creds_file'
      | 'nats_nkey_file'
      | 'nats_tls_ca_file'
      | 'nats_tls_cert_file'
      | 'nats_tls_key_file'
    >
  >;

function readSecret(file: string, what: string): Uint8Array {
  try {
    return readFileSync(file);
  } catch (err) {
    throw new Error(`cannot read the NATS ${what} ${file}: ${(err as Error).message}`);
  }
}

/**
 * How this process signs in to NATS (docs/security.md): the configured user, token, `.creds` file or NKey; else, on a
 * loopback URL, the generated user of the local server `darshak start` runs under the same data directory. Replies
 * come to an inbox named after the user, which the generated per-role permissions rely on.
 */
export function natsConnectOptions(config: NatsAccess): Partial<ConnectionOptions> {
  const out: Partial<ConnectionOptions> = {};
  const set = (v: string | undefined): v is string => v !== undefined && v !== '';
  if (set(config.nats_user)) {
    out.user = config.nats_user;
    out.pass = config.nats_password ?? '';
    out.inboxPrefix = inboxPrefix(config.nats_user);
  } else if (set(config.nats_token)) out.token = config.nats_token;
  else if (set(config.nats_creds_file))
    out.authenticator = credsAuthenticator(readSecret(config.nats_creds_file, 'credentials file'));
  else if (set(config.nats_nkey_file)) {
    out.authenticator = nkeyAuthenticator(
      new TextEncoder().encode(new TextDecoder().decode(readSecret(config.nats_nkey_file, 'NKey seed file')).trim()),
    );
  } else if (set(config.data_dir) && isLoopbackUrl(config.nats_url)) {
    const local = readLocalCredentials(config.data_dir);
    if (local) {
      out.user = local.user;
      out.pass = local.password;
      out.inboxPrefix = inboxPrefix(local.user);
    }
  }
  const tls = {
    ...(set(config.nats_tls_ca_file) ? { caFile: config.nats_tls_ca_file } : {}),
    ...(set(config.nats_tls_cert_file) ? { certFile: config.nats_tls_cert_file } : {}),
    ...(set(config.nats_tls_key_file) ? { keyFile: config.nats_tls_key_file } : {}),
  };
  if (Object.keys(tls).length > 0 || /(^|,)\s*tls:\/\//.test(config.nats_url)) out.tls = tls;
  return out;
}
