import { Bus } from '../bus/bus.js';
import type { Config } from '../config/schema.js';
import { ControlPlane } from '../control/control-plane.js';
import { ControlError } from '../control/kv-records.js';
import type { PlanName } from '../control/plans.js';
import type { Environment, Role, TenantStatus } from '../control/records.js';
import type { Logger } from '../log.js';
import { flags, integerFlag, UsageError } from './args.js';

// CONTRACT §3: each command prints one JSON object on stdout and exits 0, or an error on stderr and exits non-zero.

type Command = (control: ControlPlane, argv: string[]) => Promise<unknown>;

/** `--monthly-quota plan` (or `--rate-per-minute plan`) drops a tenant's override and goes back to its plan's figure. */
function overrideFlag(value: string | undefined, name: string): number | null | undefined {
  if (value === 'plan') return null;
  return integerFlag(value, name);
}

/** `--alert-thresholds '{"qos.rebuffer_spike":{"min_sessions":10}}'` replaces the overrides; `default` drops them. */
function jsonFlag(value: string, name: string): Record<string, Record<string, number>> | null {
  if (value === 'default') return null;
  try {
    return JSON.parse(value) as Record<string, Record<string, number>>;
  } catch {
    throw new UsageError(`--${name} must be JSON (or "default")`);
  }
}

export const adminCommands: Record<string, Record<string, Command>> = {
  tenant: {
    async create(control, argv) {
      const f = flags(
        argv,
        {
          slug: { type: 'string' },
          name: { type: 'string' },
          plan: { type: 'string' },
          'owner-email': { type: 'string' },
          'owner-password': { type: 'string' },
        },
        ['slug', 'name', 'plan', 'owner-email', 'owner-password'],
      );
      return control.createTenant({
        slug: f.slug as string,
        name: f.name as string,
        plan: f.plan as PlanName,
        ownerEmail: f['owner-email'] as string,
        ownerPassword: f['owner-password'] as string,
      });
    },
    async update(control, argv) {
      const f = flags(
        argv,
        {
          slug: { type: 'string' },
          name: { type: 'string' },
          plan: { type: 'string' },
          status: { type: 'string' },
          'monthly-quota': { type: 'string' },
          'rate-per-minute': { type: 'string' },
          'alert-thresholds': { type: 'string' },
        },
        ['slug'],
      );
      const patch = {
        ...(f.name !== undefined && { name: f.name }),
        ...(f.plan !== undefined && { plan: f.plan as PlanName }),
        ...(f.status !== undefined && { status: f.status as TenantStatus }),
        ...(f['monthly-quota'] !== undefined && { monthly_quota: overrideFlag(f['monthly-quota'], 'monthly-quota') }),
        ...(f['rate-per-minute'] !== undefined && {
          rate_per_minute: overrideFlag(f['rate-per-minute'], 'rate-per-minute'),
        }),
        ...(f['alert-thresholds'] !== undefined && {
          alert_thresholds: jsonFlag(f['alert-thresholds'], 'alert-thresholds'),
        }),
      };
      if (Object.keys(patch).length === 0)
        throw new UsageError(
          'nothing to update: give --plan, --status, --monthly-quota, --rate-per-minute, --alert-thresholds or --name',
        );
      // Loaded only here: checking thresholds loads every pipeline, which no other admin command needs.
      if (patch.alert_thresholds !== undefined)
        (await import('../metric/thresholds.js')).checkOverrides(patch.alert_thresholds);
      const t = await control.updateTenant(f.slug as string, patch);
      return {
        tenant_slug: t.slug,
        name: t.name,
        plan: t.plan,
        status: t.status,
        monthly_quota: t.monthly_quota,
        rate_per_minute: t.rate_per_minute,
        alert_thresholds: t.alert_thresholds ?? null,
        updated_at: t.updated_at,
      };
    },
  },
  user: {
    async add(control, argv) {
      const f = flags(
        argv,
        {
          tenant: { type: 'string' },
          email: { type: 'string' },
          password: { type: 'string' },
          role: { type: 'string' },
        },
        ['tenant', 'email', 'password', 'role'],
      );
      return control.users.add({
        tenant: f.tenant as string,
        email: f.email as string,
        password: f.password as string,
        role: f.role as Role,
      });
    },
    // An operator's "sign out everywhere": a lost laptop, a leaver.
    async 'sign-out'(control, argv) {
      const f = flags(argv, { email: { type: 'string' } }, ['email']);
      const id = await control.users.findId(f.email as string);
      const user = id === null ? null : await control.users.signOutEverywhere(id);
      if (!user) throw new ControlError('not_found', `no user with e-mail ${f.email as string}`);
      return { id: user.id, email: user.email, signed_out_at: new Date().toISOString() };
    },
  },
  apikey: {
    async create(control, argv) {
      const f = flags(argv, { tenant: { type: 'string' }, name: { type: 'string' }, environment: { type: 'string' } }, [
        'tenant',
        'name',
        'environment',
      ]);
      return control.apiKeys.create({
        tenant: f.tenant as string,
        name: f.name as string,
        environment: f.environment as Environment,
      });
    },
    async list(control, argv) {
      const f = flags(argv, { tenant: { type: 'string' } }, ['tenant']);
      return { api_keys: await control.apiKeys.list(f.tenant as string) };
    },
    async revoke(control, argv) {
      const f = flags(argv, { tenant: { type: 'string' }, id: { type: 'string' } }, ['tenant', 'id']);
      return control.apiKeys.revoke(f.tenant as string, f.id as string);
    },
  },
};

export async function runAdmin(
  group: string,
  action: string | undefined,
  argv: string[],
  config: Config,
  log: Logger,
  out: NodeJS.WritableStream,
): Promise<void> {
  const commands = adminCommands[group] as Record<string, Command>;
  const command = action === undefined ? undefined : commands[action];
  if (!command) throw new UsageError(`darshak ${group} takes one of: ${Object.keys(commands).join(', ')}`);
  const bus = await Bus.connect(config, log, 'darshak-cli');
  try {
    const control = await ControlPlane.open(bus);
    const result = await command(control, argv);
    out.write(`${JSON.stringify(result)}\n`);
  } finally {
    await bus.close();
  }
}

export { ControlError };
