import { spawn, type ChildProcess } from 'node:child_process';
import { AggregatorRegistry, type MetricObjectWithValues, type MetricValue } from 'prom-client';
import type { Logger } from '../log.js';
import type { Listener } from '../modules.js';
import { registry, setMetricsSource } from '../metrics.js';

// One box, every role (`box_processes: roles`, docs/deployment.md): `darshak start` supervises a child process per
// group of roles, so ingest, the aggregators and the store each get an event loop and a core of their own. The groups
// talk over NATS as in any distributed layout; this file only starts, stops and watches them, and lets either listener
// serve the metrics of the whole box.

/**
 * The children, in the order they stop: ingest stops taking events first, the aggregators then seal what it
 * published, and the store's roles write the aggregators' last output. The roles that use the embedded store share a
 * process (chDB admits one per data directory).
 */
export const boxProcesses: readonly (readonly string[])[] = [
  ['ingest'],
  ['aggregate'],
  ['flush', 'api', 'alerts', 'webhooks'],
];

/** Set in a child's environment: it runs its roles for a supervisor, and says so over IPC. */
export const boxChildEnv = 'DARSHAK_BOX_CHILD';

type Metrics = MetricObjectWithValues<MetricValue<string>>[];

/** A child that exited unasked: its roles, and how it ended. */
export interface ChildExit {
  roles: string;
  code: number | null;
  signal: string | null;
}

/** What supervisor and children tell each other over the IPC channel. */
type BoxMessage =
  | { kind: 'started'; listeners: Record<string, Listener> }
  | { kind: 'metrics_request'; id: number }
  | { kind: 'metrics_collect'; id: number }
  | { kind: 'metrics_report'; id: number; metrics: Metrics }
  | { kind: 'metrics_answer'; id: number; text: string };

const isBoxMessage = (m: unknown): m is BoxMessage =>
  typeof m === 'object' && m !== null && typeof (m as { kind?: unknown }).kind === 'string';

/** How long the supervisor waits for a child's metrics before answering without them. */
const metricsWaitMs = 2000;

export interface Box {
  /** Resolves with the children's listeners once every child has started its roles. */
  started: Promise<Record<string, Listener>>;
  /** Resolves with the first child that exited unasked (its roles failed), or never. */
  failed: Promise<ChildExit>;
  /** Stop the children in `boxProcesses` order, each after the one before has exited. */
  stop(): Promise<void>;
}

/** Start the box's children: `darshak start --role …` of this same program, with this process's flags and node options. */
export function startBox(shards: string | undefined, log: Logger): Box {
  const boxLog = log.child({ module: 'box' });
  let stopping = false;
  let reportFailure: (f: ChildExit) => void = () => undefined;
  const failed = new Promise<ChildExit>((resolve) => (reportFailure = resolve));
  const listeners: Record<string, Listener> = {};
  const collecting = new Map<number, { reports: Metrics[]; waiting: number; done: () => void }>();
  let nextCollect = 1;

  const children = boxProcesses.map((roles) => {
    const args = [...process.execArgv, process.argv[1]!, 'start', '--role', roles.join(',')];
    if (shards !== undefined && roles.includes('aggregate')) args.push('--shards', shards);
    const child = spawn(process.execPath, args, {
      env: { ...process.env, [boxChildEnv]: '1' },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      // Its own process group: a Ctrl-C reaches the supervisor only, which stops the children in order.
      detached: true,
    });
    const label = roles.join(',');
    child.once('exit', (code, signal) => {
      if (stopping) return;
      boxLog.error({ roles: label, code, signal }, 'a child process of the box exited; stopping the others');
      reportFailure({ roles: label, code, signal });
    });
    return { roles: label, child, started: false };
  });

  let markStarted: (l: Record<string, Listener>) => void = () => undefined;
  const started = new Promise<Record<string, Listener>>((resolve) => (markStarted = resolve));

  /** Every child's registry, merged as prom-client's cluster mode merges its workers' (counters and histograms summed). */
  const collect = async (): Promise<string> => {
    const live = children.filter((c) => c.child.connected);
    const id = nextCollect++;
    const reports: Metrics[] = [];
    await new Promise<void>((done) => {
      const timer = setTimeout(done, metricsWaitMs);
      collecting.set(id, {
        reports,
        waiting: live.length,
        done: () => {
          clearTimeout(timer);
          done();
        },
      });
      for (const c of live) c.child.send({ kind: 'metrics_collect', id } satisfies BoxMessage);
      if (live.length === 0) collecting.get(id)!.done();
    });
    collecting.delete(id);
    return AggregatorRegistry.aggregate(reports).metrics();
  };

  for (const c of children) {
    c.child.on('message', (m: unknown) => {
      if (!isBoxMessage(m)) return;
      if (m.kind === 'started') {
        Object.assign(listeners, m.listeners);
        c.started = true;
        if (children.every((x) => x.started)) markStarted({ ...listeners });
      } else if (m.kind === 'metrics_request') {
        void collect().then((text) => {
          if (c.child.connected) c.child.send({ kind: 'metrics_answer', id: m.id, text } satisfies BoxMessage);
        });
      } else if (m.kind === 'metrics_report') {
        const pending = collecting.get(m.id);
        if (!pending) return;
        pending.reports.push(m.metrics);
        if (--pending.waiting === 0) pending.done();
      }
    });
  }

  const exited = (child: ChildProcess): Promise<void> =>
    child.exitCode !== null || child.signalCode !== null
      ? Promise.resolve()
      : new Promise((resolve) => child.once('exit', () => resolve()));

  return {
    started,
    failed,
    async stop() {
      stopping = true;
      for (const { child } of children) {
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
        await exited(child);
      }
    },
  };
}

/**
 * In a child of the box: tell the supervisor when the roles have started, answer its requests for this process's
 * metrics, serve the whole box's on /metrics, and die with the supervisor (a supervisor killed with -9 must not
 * leave roles running that a restart would collide with: the store's lock, the listeners' ports).
 */
export function joinBox(log: Logger): { started(listeners: Record<string, Listener>): void } {
  const send = (m: BoxMessage): void => {
    if (process.connected) process.send!(m);
  };
  const answers = new Map<number, (text: string) => void>();
  let nextRequest = 1;
  process.on('disconnect', () => {
    log.child({ module: 'box' }).error('the supervising process is gone; exiting at once');
    process.kill(process.pid, 'SIGKILL');
  });
  process.on('message', (m: unknown) => {
    if (!isBoxMessage(m)) return;
    if (m.kind === 'metrics_collect')
      void registry.getMetricsAsJSON().then((metrics) => send({ kind: 'metrics_report', id: m.id, metrics }));
    else if (m.kind === 'metrics_answer') {
      answers.get(m.id)?.(m.text);
      answers.delete(m.id);
    }
  });
  setMetricsSource(
    () =>
      new Promise<string>((resolve, reject) => {
        if (!process.connected) return reject(new Error('the supervising process is gone'));
        const id = nextRequest++;
        answers.set(id, resolve);
        send({ kind: 'metrics_request', id });
      }),
  );
  return { started: (listeners) => send({ kind: 'started', listeners }) };
}
