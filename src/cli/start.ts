import { ensureLocalNats } from '../bus/local-server.js';
import type { Config } from '../config/schema.js';
import type { Logger } from '../log.js';
import { BusUnavailableError, isPassingBusError } from '../bus/bus.js';
import { resolveTargets, Services, StartAbandonedError, startModules, type Started } from '../modules.js';
import { registry } from '../registry.js';
import { OperatorError } from '../operator-error.js';
import { flags } from './args.js';
import { boxChildEnv, boxProcesses, joinBox, startBox } from './box.js';

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
    const inBox = process.env[boxChildEnv] === '1' && process.send !== undefined;
    let started = false;
    const localNats = await ensureLocalNats(single ? config : { ...config, nats_autostart: false }, log);
    try {
      if (single && !inBox && config.box_processes === 'roles') {
        await superviseBox(f.shards, targets, log, stopRequested, () => signalled);
        return;
      }
      const box = inBox ? joinBox(log) : undefined;
      const running = await startPatiently(
        (abandon) => {
          const services = new Services(config, log);
          services.checks.push({ name: 'roles', ready: () => started });
          return startModules(registry, targets, services, abandon);
        },
        log,
        stopRequested,
      );
      if (!running) return log.info({ signal: signalled }, 'stopped while starting');
      started = true;
      const listeners = Object.fromEntries(running.services.listeners);
      log.info(
        { roles: targets, modules: running.modules, listeners },
        box ? 'roles of the box started' : 'darshak started',
      );
      box?.started(listeners);
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

/**
 * Every role on one box as child processes (cli/box.ts): started until a signal, or until one of them exits unasked,
 * which stops the others and fails the start with the reason, for the box's own supervisor to start it again.
 */
async function superviseBox(
  shards: string | undefined,
  targets: readonly string[],
  log: Logger,
  stopRequested: Promise<void>,
  signalled: () => string | undefined,
): Promise<void> {
  const box = startBox(shards, log);
  const stopped = stopRequested.then(() => null);
  const failed = box.failed.then((f) => ({ kind: 'failed' as const, ...f }));
  const first = await Promise.race([
    box.started.then((listeners) => ({ kind: 'started' as const, listeners })),
    failed,
    stopped,
  ]);
  if (first?.kind === 'started')
    log.info(
      { roles: targets, processes: boxProcesses.map((roles) => roles.join(',')), listeners: first.listeners },
      'darshak started',
    );
  const failure = first?.kind === 'failed' ? first : first === null ? null : await Promise.race([failed, stopped]);
  if (failure === null) log.info({ signal: signalled() }, 'stopping');
  await box.stop();
  if (failure !== null)
    throw new OperatorError(
      `the ${failure.roles} process of the box exited (${failure.signal ?? `code ${failure.code}`}); the others were stopped: its log above says why`,
    );
  log.info('stopped');
}

/** How long a start is tried again while JetStream does not answer. */
const startPatienceMs = 120_000;

/**
 * Start the roles, and start them again while JetStream does not answer yet (a cluster electing its leaders after
 * it formed or lost a server): a role that exited would only be started again by its supervisor, a crash in its
 * log. Other failures, and a JetStream still silent after two minutes, end the start. Undefined when a signal came
 * meanwhile.
 */
async function startPatiently(
  start: (abandon: () => boolean) => Promise<Started>,
  log: Logger,
  stopRequested: Promise<void>,
): Promise<Started | undefined> {
  const since = Date.now();
  let stop = false;
  void stopRequested.then(() => (stop = true));
  for (let attempt = 1; ; attempt++) {
    try {
      return await start(() => stop);
    } catch (err) {
      if (err instanceof StartAbandonedError) return undefined;
      const waitMs = Math.min(1000 * 2 ** (attempt - 1), 10_000);
      if (stop || !isPassingBusError(err)) throw err;
      if (Date.now() - since + waitMs > startPatienceMs)
        throw new BusUnavailableError(
          `JetStream did not answer for ${Math.round((Date.now() - since) / 1000)} s as the roles started (a cluster without a quorum, or with fewer servers than STREAM_REPLICAS): ${(err as Error).message}`,
        );
      log.warn(
        { err: (err as Error).message, attempt, retry_in_ms: waitMs },
        'JetStream did not answer as the roles started; starting them again',
      );
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([stopRequested, new Promise((r) => (timer = setTimeout(r, waitMs)))]);
      clearTimeout(timer);
      if (stop) return undefined;
    }
  }
}
