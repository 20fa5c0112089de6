#!/usr/bin/env node
import { ControlError } from './control/kv-records.js';
import { loadConfig } from './config/load.js';
import { OperatorError } from './operator-error.js';
import { createLogger } from './log.js';
import { runAdmin } from './cli/admin.js';
import { UsageError } from './cli/args.js';

const usage = `darshak: real-time analytics for video streaming

  darshak start [--role all|ingest,aggregate,flush,api,webhooks] [--shards 0,1]
  darshak tenant create --slug S --name N --plan free|pro|enterprise --owner-email E --owner-password P
  darshak tenant update --slug S [--plan P] [--status active|inactive] [--monthly-quota N|plan] [--rate-per-minute N|plan] [--name N]
  darshak user add --tenant S --email E --password P --role owner|admin|viewer
  darshak user sign-out --email E               (every token of the user refused within a second)
  darshak apikey create --tenant S --name N --environment production|staging|development
  darshak apikey list --tenant S
  darshak apikey revoke --tenant S --id ID
  darshak replay --tenant S --from T --to T      (T: 2026-11-20 or 2026-11-20T18:30:00Z; whole minutes)
  darshak nats-auth [--prefix P] [--passwords]    (nats-server users per role; --passwords: a .env of new ones)

Configuration: config/default.json < config/$NODE_ENV.json < environment variables (docs/configuration.md).
`;

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined || command === 'help' || command === '--help' || command === '-h') {
    process.stdout.write(usage);
    return command === undefined ? 2 : 0;
  }
  let config;
  try {
    config = loadConfig();
  } catch (err) {
    process.stderr.write(`darshak: ${(err as Error).message}\n`);
    return 78; // EX_CONFIG
  }
  const isStart = command === 'start';
  const log = createLogger(isStart ? config.log_level : 'warn');
  try {
    // Loaded only for `start`: admin commands need none of the roles' code.
    if (isStart) await (await import('./cli/start.js')).runStart(rest, config, log);
    else if (command === 'tenant' || command === 'user' || command === 'apikey') {
      const [action, ...flagsArgv] = rest;
      await runAdmin(command, action, flagsArgv, config, log, process.stdout);
    } else if (command === 'replay')
      await (await import('./cli/replay.js')).runReplay(rest, config, log, process.stdout);
    else if (command === 'nats-auth') (await import('./cli/nats-auth.js')).runNatsAuth(rest, config, process.stdout);
    else throw new UsageError(`unknown command ${JSON.stringify(command)}`);
    return 0;
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`darshak: ${err.message}\n\n${usage}`);
      return 2;
    }
    if (err instanceof ControlError) {
      process.stderr.write(`darshak: error: ${err.message} (${err.code})\n`);
      return 1;
    }
    // Errors that say what to do: no stack trace.
    if (err instanceof OperatorError) {
      process.stderr.write(`darshak: ${err.message}\n`);
      return 1;
    }
    log.fatal({ err }, 'failed');
    process.stderr.write(`darshak: ${(err as Error).message}\n`);
    return 1;
  }
}

// Exit explicitly: an open NATS socket or a timer must not keep a finished command alive.
main(process.argv.slice(2)).then(
  (code) => setImmediate(() => process.exit(code)),
  (err: unknown) => {
    process.stderr.write(`darshak: ${String(err)}\n`);
    process.exit(1);
  },
);
