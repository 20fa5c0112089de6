// The soak's faults: a schedule drawn from the seed alone (so a failing seed is replayed exactly), and a runner that
// plays it on the layout while traffic flows. Time in the schedule is traffic time: the runner's clock stops while
// the soak compares answers, when every role is up again.

import { sleep } from '../host.js';
import { Rng } from '../simulator/rng.js';
import type { Layout } from './layout.js';

export type Fault =
  /** kill -9 of a role, started again after `down` ms. */
  | { at: number; kind: 'kill'; role: string; down: number }
  /** SIGTERM (a drain, as a deploy does), started again after `down` ms. */
  | { at: number; kind: 'term'; role: string; down: number }
  /** A nats-server (of a cluster, the `server`th) killed -9 and started again on its store after `down` ms. */
  | { at: number; kind: 'nats'; server: number; down: number }
  /** The webhook receiver answers 503 or drops the connection for `down` ms. */
  | { at: number; kind: 'webhook'; down: number };

/** `perMinute` faults a minute on average (a Poisson process) over `ms` of traffic, among `roles` and `servers` NATS servers. */
export function schedule(
  seed: number,
  ms: number,
  perMinute: number,
  roles: readonly string[],
  servers: number,
): Fault[] {
  const rng = new Rng(seed ^ 0x50a4);
  const faults: Fault[] = [];
  const between = (lo: number, hi: number): number => Math.round(lo + rng.next() * (hi - lo));
  for (
    let at = -Math.log(1 - rng.next()) * (60_000 / perMinute);
    at < ms;
    at += -Math.log(1 - rng.next()) * (60_000 / perMinute)
  ) {
    const roll = rng.next();
    const when = Math.round(at);
    if (roll < 0.5)
      faults.push({ at: when, kind: 'kill', role: roles[rng.int(0, roles.length - 1)]!, down: between(100, 5000) });
    else if (roll < 0.7)
      faults.push({ at: when, kind: 'term', role: roles[rng.int(0, roles.length - 1)]!, down: between(100, 3000) });
    else if (roll < 0.85)
      faults.push({
        at: when,
        kind: 'nats',
        server: servers > 1 ? rng.int(0, servers - 1) : 0,
        down: between(500, 5000),
      });
    else faults.push({ at: when, kind: 'webhook', down: between(2000, 20_000) });
  }
  return faults;
}

export function describe(f: Fault): string {
  const down = `${(f.down / 1000).toFixed(1)} s`;
  if (f.kind === 'kill') return `kill -9 ${f.role}, back after ${down}`;
  if (f.kind === 'term') return `SIGTERM ${f.role}, back after ${down}`;
  if (f.kind === 'nats') return `kill -9 nats-server n${f.server}, back after ${down}`;
  return `webhook receiver failing for ${down}`;
}

export interface FaultTarget {
  layout: Layout;
  /** The receiver fails until `until` (ms since the epoch). */
  failWebhooks(until: number): void;
}

/** A fault as the runner met it: skipped (its part already down), and the real time it was (ms since the epoch). */
export type AppliedFault = Fault & { skipped: boolean; appliedAt: number };

/** Plays a schedule: `resume` while traffic flows, `pause` to stop the clock with every part up again. */
export class FaultRunner {
  private next = 0;
  private elapsed = 0;
  private since: number | undefined;
  private timer: NodeJS.Timeout | undefined;
  private readonly underway = new Set<Promise<void>>();
  /** Roles, and `nats` (any server of a cluster: two down would leave no quorum), that a fault has down now: another fault on them is skipped. */
  private readonly down = new Set<string>();
  readonly done: AppliedFault[] = [];

  constructor(
    private readonly faults: readonly Fault[],
    private readonly target: FaultTarget,
    private readonly say: (line: string) => void,
  ) {}

  resume(): void {
    this.since = Date.now();
    this.tick();
  }

  /** Stops the clock; resolves once every fault under way has ended and every role is ready again. */
  async pause(): Promise<void> {
    if (this.since !== undefined) this.elapsed += Date.now() - this.since;
    this.since = undefined;
    clearTimeout(this.timer);
    while (this.underway.size > 0) await Promise.all([...this.underway]);
    await this.target.layout.ready();
  }

  private tick(): void {
    if (this.since === undefined) return;
    const now = this.elapsed + (Date.now() - this.since);
    while (this.next < this.faults.length && this.faults[this.next]!.at <= now) this.start(this.faults[this.next++]!);
    const due = this.faults[this.next];
    if (due) this.timer = setTimeout(() => this.tick(), Math.max(10, due.at - now));
  }

  private start(f: Fault): void {
    const key = f.kind === 'kill' || f.kind === 'term' ? f.role : f.kind;
    const skipped = this.down.has(key);
    this.done.push({ ...f, skipped, appliedAt: Date.now() });
    this.say(
      `fault ${this.done.length} at ${(f.at / 1000).toFixed(1)} s: ${describe(f)}${skipped ? ' (skipped: already down)' : ''}`,
    );
    if (skipped) return;
    this.down.add(key);
    const run = this.play(f).finally(() => {
      this.down.delete(key);
      this.underway.delete(run);
    });
    this.underway.add(run);
  }

  private async play(f: Fault): Promise<void> {
    const { layout } = this.target;
    if (f.kind === 'webhook') {
      this.target.failWebhooks(Date.now() + f.down);
      return sleep(f.down);
    }
    if (f.kind === 'nats') {
      await layout.nats[f.server]!.kill();
      await sleep(f.down);
      return layout.startNats(f.server);
    }
    await layout.stop(f.role, f.kind === 'kill' ? 'SIGKILL' : 'SIGTERM');
    await sleep(f.down);
    layout.restart(f.role);
  }
}
