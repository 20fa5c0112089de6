import { DiscardPolicy, RetentionPolicy, StorageType } from 'nats';
import { nanos, type Bus } from '../bus/bus.js';

// Each message is one alert version (`AlertRow`, src/store/alerts.ts, as JSON) under `alertRowsSubject(tenant)`,
// published by the alerts role and stored by the flush role.

/** The stream of alert versions the flush role stores; an hour's duplicate window makes republishing harmless. */
export async function ensureAlertStream(bus: Bus): Promise<void> {
  await bus.ensureStream({
    name: bus.names.alertsStream,
    subjects: [bus.names.alertRowsWildcard],
    storage: StorageType.File,
    retention: RetentionPolicy.Limits,
    discard: DiscardPolicy.Old,
    max_age: nanos(30 * 86_400_000),
    duplicate_window: nanos(3_600_000),
  });
}
