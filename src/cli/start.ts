import { ensureLocalNats } from '../bus/local-server.js';
import type { Config } from '../config/schema.js';
import type { Logger } from '../log.js';
import { resolveTargets, Services, startModules } from '../modules.js';
import { registry } from '../registry.js';
import { flags } from './args.js';

/** `darshak start [--role all|r1,r2] [--shards 0,1]`: run roles until SIGINT or SIGTERM, then drain and stop. */
export async function runStart(argv: string[], config: Config, log: Logger): Promise<void> {
  const f = flags(argv, { role: { type: 'string' }, shards: { type: 'string' } });
  if (f.shards !== undefined) config = { ...config, aggregate_shards: f.shards.split(',').map((s) => s.trim()) };
  const targets = resolveTargets(registry, f.role ?? process.env.DARSHAK_ROLE ?? 'all');
  // Handlers first: a signal that arrives while roles are still starting must stop them, not kill the process and
  // orphan a nats-server it started.
  let signalled: string | undefined;
  let wake: () => void = () => undefined;
  const stopRequested = new Promise<void>((resolve) => (wake = resolve));
  const onSignal = (signal: string): void => {
    signalled = signal;
    wake();
  };
  const onInt = (): void => onSignal('SIGINT');
  const onTerm = (): void => onSignal('SIGTERM');
  process.on('SIGINT', onInt);
  process.on('SIGTERM', onTerm);
  try {
    // Only the single-machine mode runs its own NATS: a process of a distributed layout that found NATS down for a
    // moment (a restart) would otherwise take its address with a server of its own, and split the layout.
    const single = targets.length === resolveTargets(registry, 'all').length;
    const localNats = await ensureLocalNats(single ? config : { ...config, nats_autostart: false }, log);
    const services = new Services(config, log);
    let started = false;
    services.checks.push({ name: 'roles', ready: () => started });
    try {
      const running = await startModules(registry, targets, services);
      started = true;
      log.info({ roles: targets, modules: running.modules, listeners: Object.fromEntries(services.listeners) }, 'darshak started');
      await stopRequested;
      log.info({ signal: signalled }, 'stopping');
      await running.stop();
    } finally {
      await localNats?.stop();
    }
    log.info('stopped');
  } finally {
    process.off('SIGINT', onInt);
    process.off('SIGTERM', onTerm);
  }
}
