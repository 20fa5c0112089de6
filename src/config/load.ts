import { readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv } from 'ajv';
import { configKeys, configSchema, type Config } from './schema.js';
import { OperatorError } from '../operator-error.js';

export class ConfigError extends OperatorError {
  override name = 'ConfigError';
}

export interface LoadOptions {
  /** Folder holding default.json and <NODE_ENV>.json. */
  dir?: string;
  env?: NodeJS.ProcessEnv;
  /** Highest precedence, used by the CLI flags and by tests. */
  overrides?: Partial<Config>;
}

export function defaultConfigDir(): string {
  // Compiled code runs from dist/src/config, sources from src/config: both sit below the project's config/.
  const compiled = new URL('../../../config', import.meta.url).pathname;
  return existsSync(join(compiled, 'default.json')) ? compiled : new URL('../../config', import.meta.url).pathname;
}

function readJson(path: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError(`config: cannot read ${path}: ${(err as Error).message}`);
  }
  try {
    const value: unknown = JSON.parse(text);
    if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new Error('not a JSON object');
    return value as Record<string, unknown>;
  } catch (err) {
    throw new ConfigError(`config: ${path} is not a JSON object: ${(err as Error).message}`);
  }
}

/** Environment variables are strings: turn each into the type its key declares, or say which key is wrong. */
function fromEnv(env: NodeJS.ProcessEnv): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, spec] of Object.entries(configKeys)) {
    const name = key.toUpperCase();
    const raw = env[name];
    if (raw === undefined) continue;
    switch (spec.type) {
      case 'integer': {
        if (!/^-?\d+$/.test(raw.trim()))
          throw new ConfigError(`config: ${name} (${key}) must be an integer, got ${JSON.stringify(raw)}`);
        out[key] = Number(raw.trim());
        break;
      }
      case 'boolean': {
        const v = raw.trim().toLowerCase();
        if (['1', 'true', 'yes', 'on'].includes(v)) out[key] = true;
        else if (['0', 'false', 'no', 'off', ''].includes(v)) out[key] = false;
        else throw new ConfigError(`config: ${name} (${key}) must be true or false, got ${JSON.stringify(raw)}`);
        break;
      }
      case 'array':
        out[key] = raw
          .split(',')
          .map((s) => s.trim())
          .filter((s) => s.length > 0);
        break;
      default:
        out[key] = raw;
    }
  }
  return out;
}

const ajv = new Ajv({ allErrors: false });
const validate = ajv.compile<Config>(configSchema);

/** default.json < <NODE_ENV>.json < environment < overrides, validated once. */
export function loadConfig(options: LoadOptions = {}): Config {
  const env = options.env ?? process.env;
  const dir = options.dir ?? defaultConfigDir();
  const merged: Record<string, unknown> = { ...readJson(join(dir, 'default.json')) };
  const nodeEnv = env.NODE_ENV;
  if (nodeEnv) {
    if (!/^[a-z0-9_-]+$/i.test(nodeEnv))
      throw new ConfigError(`config: NODE_ENV ${JSON.stringify(nodeEnv)} is not a plain name`);
    const path = join(dir, `${nodeEnv}.json`);
    if (existsSync(path)) Object.assign(merged, readJson(path));
  }
  Object.assign(merged, fromEnv(env), options.overrides ?? {});
  if (!validate(merged)) {
    const err = validate.errors?.[0];
    const key =
      err?.instancePath.replace(/^\//, '').split('/')[0] ||
      String(err?.params.additionalProperty ?? err?.params.missingProperty ?? '');
    const value = key in merged ? ` (got ${JSON.stringify(merged[key])})` : '';
    const label = key in configKeys ? `${key.toUpperCase()} (${key})` : key;
    throw new ConfigError(`config: ${label} ${err?.message ?? 'is invalid'}${value}`);
  }
  checkCombinations(merged);
  return merged;
}

function checkCombinations(config: Config): void {
  if (config.base_port !== 0 && config.base_port === config.ingest_port) {
    throw new ConfigError(
      `config: BASE_PORT (base_port) and INGEST_PORT (ingest_port) are both ${config.base_port}; the two listeners need different ports`,
    );
  }
  try {
    new URL(config.public_base_url);
  } catch {
    throw new ConfigError(
      `config: PUBLIC_BASE_URL (public_base_url) is not a URL: ${JSON.stringify(config.public_base_url)}`,
    );
  }
  if (config.ingest_shed_lag_ms > 0 && config.ingest_shed_max_lag_ms <= config.ingest_shed_lag_ms) {
    throw new ConfigError(
      `config: INGEST_SHED_MAX_LAG_MS (ingest_shed_max_lag_ms) is ${config.ingest_shed_max_lag_ms} but must be more than INGEST_SHED_LAG_MS (ingest_shed_lag_ms), ${config.ingest_shed_lag_ms}`,
    );
  }
  if ((config.nats_user === '') !== (config.nats_password === '')) {
    throw new ConfigError(
      'config: NATS_USER (nats_user) and NATS_PASSWORD (nats_password) go together: set both or neither',
    );
  }
  const ways = (
    [
      ['NATS_USER (nats_user)', config.nats_user],
      ['NATS_TOKEN (nats_token)', config.nats_token],
      ['NATS_CREDS_FILE (nats_creds_file)', config.nats_creds_file],
      ['NATS_NKEY_FILE (nats_nkey_file)', config.nats_nkey_file],
    ] as const
  ).filter(([, v]) => v !== '');
  if (ways.length > 1)
    throw new ConfigError(`config: ${ways.map(([k]) => k).join(' and ')} are each a way to sign in to NATS; set one`);
  if ((config.nats_tls_cert_file === '') !== (config.nats_tls_key_file === '')) {
    throw new ConfigError(
      'config: NATS_TLS_CERT_FILE (nats_tls_cert_file) and NATS_TLS_KEY_FILE (nats_tls_key_file) go together: set both or neither',
    );
  }
  if (config.ops_token !== '' && config.ops_token.length < 16) {
    throw new ConfigError(
      `config: OPS_TOKEN (ops_token) must be at least 16 characters, got ${config.ops_token.length}`,
    );
  }
  if (config.jwks_secret !== '' && config.jwks_secret.length < 32) {
    throw new ConfigError(
      `config: JWKS_SECRET (jwks_secret) must be at least 32 characters, got ${config.jwks_secret.length}`,
    );
  }
  if (config.clickhouse_url !== '' && !/^https?:\/\//.test(config.clickhouse_url)) {
    throw new ConfigError(
      `config: CLICKHOUSE_URL (clickhouse_url) must be an http(s) URL, got ${JSON.stringify(config.clickhouse_url.replace(/\/\/[^/@]*@/, '//***@'))}`,
    );
  }
}
