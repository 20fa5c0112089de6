import type { ExportService } from './api/exports.js';
import type { TokenService } from './api/tokens.js';
import type { Bus } from './bus/bus.js';
import type { Config } from './config/schema.js';
import type { ControlPlane } from './control/control-plane.js';
import type { ApiKeyRecord, TenantRecord } from './control/records.js';
import type { UsageCounters } from './control/usage.js';
import type { KeyUsage } from './control/key-usage.js';
import type { WatchedMap } from './control/watched-map.js';
import type { ReadinessCheck } from './http/ops.js';
import type { Logger } from './log.js';
import type { Store } from './store/store.js';

// Roles as modules, after Grafana Loki's pkg/loki/modules.go: each module names the modules it needs, the manager
// starts them in dependency order (once each, however many roles need them) and stops them in reverse.

/** What shared modules provide to the modules that depend on them. */
export interface ServiceTypes {
  bus: Bus;
  control: ControlPlane;
  directory: { keys: WatchedMap<ApiKeyRecord>; tenants: WatchedMap<TenantRecord> };
  usage: UsageCounters;
  keyUsage: KeyUsage;
  store: Store;
  tokens: TokenService;
  exports: ExportService;
}

/** A listener a role opened: its bound port and the HTTP engine serving it. */
export interface Listener {
  port: number;
  engine: string;
}

export class Services {
  private readonly values = new Map<keyof ServiceTypes, unknown>();
  readonly checks: ReadinessCheck[] = [];
  /** Listeners opened by roles, by name (`ingest`, `base`): the bound port matters when the config asks for port 0. */
  readonly listeners = new Map<string, Listener>();
  constructor(
    readonly config: Config,
    readonly log: Logger,
  ) {}
  set<K extends keyof ServiceTypes>(name: K, value: ServiceTypes[K]): void {
    this.values.set(name, value);
  }
  get<K extends keyof ServiceTypes>(name: K): ServiceTypes[K] {
    if (!this.values.has(name)) throw new Error(`module ${name} is not running in this process`);
    return this.values.get(name) as ServiceTypes[K];
  }
}

export interface Running {
  stop(): Promise<void>;
}

export interface ModuleDef {
  deps: readonly string[];
  /** Modules started first when they run in the same process, but not started for this one. */
  after?: readonly string[];
  /** Roles are what `--role` names; the rest are shared parts started because a role needs them. */
  role: boolean;
  start(services: Services): Promise<Running>;
}

export type ModuleRegistry = Readonly<Record<string, ModuleDef>>;

/** `all` is every role; a comma list names some. Unknown names are refused with the list of known ones. */
export function resolveTargets(registry: ModuleRegistry, spec: string): string[] {
  const roles = Object.keys(registry).filter((k) => registry[k]?.role);
  const asked = spec
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (asked.length === 0 || asked.includes('all')) return roles;
  for (const r of asked) {
    if (!roles.includes(r)) throw new Error(`unknown role ${JSON.stringify(r)}; roles: all, ${roles.join(', ')}`);
  }
  return asked;
}

/** Every module the targets need, dependencies first (and `after` modules among the targets before their followers). */
export function startOrder(registry: ModuleRegistry, targets: readonly string[]): string[] {
  const order: string[] = [];
  const visiting = new Set<string>();
  const visit = (name: string): void => {
    if (order.includes(name)) return;
    if (visiting.has(name)) throw new Error(`module dependency cycle at ${name}`);
    const def = registry[name];
    if (!def) throw new Error(`unknown module ${name}`);
    visiting.add(name);
    for (const d of def.deps) visit(d);
    for (const a of def.after ?? []) if (targets.includes(a)) visit(a);
    visiting.delete(name);
    order.push(name);
  };
  for (const t of targets) visit(t);
  return order;
}

export interface Started {
  modules: string[];
  services: Services;
  stop(): Promise<void>;
}

/** A start given up because the process is to stop (a signal came while its modules were starting). */
export class StartAbandonedError extends Error {
  override name = 'StartAbandonedError';
}

/** Start `targets` and what they need; `abandon` is asked after each module, so a signal waits for one module only. */
export async function startModules(
  registry: ModuleRegistry,
  targets: readonly string[],
  services: Services,
  abandon: () => boolean = () => false,
): Promise<Started> {
  const running: Array<[string, Running]> = [];
  const stop = async (): Promise<void> => {
    for (const [name, r] of running.reverse()) {
      // A stop that hangs is killed by the supervisor after its grace period: the log says which module held it.
      const slow = setTimeout(() => services.log.warn({ module: name }, 'module still stopping after 10 s'), 10_000);
      try {
        await r.stop();
      } catch (err) {
        services.log.error({ err, module: name }, 'module did not stop cleanly');
      } finally {
        clearTimeout(slow);
      }
    }
    running.length = 0;
  };
  const order = startOrder(registry, targets);
  try {
    for (const name of order) {
      services.log.debug({ module: name }, 'starting');
      running.push([name, await (registry[name] as ModuleDef).start(services)]);
      if (abandon()) throw new StartAbandonedError(`stopped while starting, after ${name}`);
    }
  } catch (err) {
    await stop();
    throw err;
  }
  return { modules: order, services, stop };
}
