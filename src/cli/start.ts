import { ensureLocalNats } from '../bus/local-server.js';
import type { Config } from '../config/schema.js';
import type { Logger } from '../log.js';
import { resolveTargets, Services, startModules } from '../modules.js';
import { registry } from '../registry.js';
import { flags } from './args.js';

/** `darshak start [--role all|r1,r2]`: run roles until SIGINT or SIGTERM, then drain and stop. */
export async function runStart(argv: string[], config: Config, log: Logger): Promise<void> {
  const f = flags(argv, { role: { type: 'string' } });
  const targets = resolveTargets(registry, f.role ?? process.env.DARSHAK_ROLE ?? 'all');
  const localNats = await ensureLocalNats(config, log);
  const services = new Services(config, log);
  let started;
  try {
    started = await startModules(registry, targets, services);
  } catch (err) {
    await localNats?.stop();
    throw err;
  }
  log.info({ roles: targets, modules: started.modules, listeners: Object.fromEntries(services.listeners) }, 'darshak started');
  await new Promise<void>((resolve) => {
    const shutdown = (signal: string): void => {
      log.info({ signal }, 'stopping');
      process.off('SIGINT', onInt);
      process.off('SIGTERM', onTerm);
      resolve();
    };
    const onInt = (): void => shutdown('SIGINT');
    const onTerm = (): void => shutdown('SIGTERM');
    process.on('SIGINT', onInt);
    process.on('SIGTERM', onTerm);
  });
  await started.stop();
  await localNats?.stop();
  log.info('stopped');
}
