// Numbers as an Indian audience reads them (lakh and crore grouping), times in the viewer's own zone.
const integer = new Intl.NumberFormat('en-IN', { maximumFractionDigits: 0 });
const decimal = new Intl.NumberFormat('en-IN', { maximumFractionDigits: 1, minimumFractionDigits: 1 });
const fine = new Intl.NumberFormat('en-IN', { maximumFractionDigits: 2, minimumFractionDigits: 2 });
const compact = new Intl.NumberFormat('en-IN', { notation: 'compact', maximumFractionDigits: 1 });
const rupees = new Intl.NumberFormat('en-IN', { style: 'currency', currency: 'INR', maximumFractionDigits: 2 });
const dateTime = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'medium' });
const time = new Intl.DateTimeFormat(undefined, { hour: '2-digit', minute: '2-digit', second: '2-digit' });

export const formatInt = (n: number): string => integer.format(n);
export const formatCompact = (n: number): string => (Math.abs(n) < 10_000 ? integer.format(n) : compact.format(n));
export const formatHours = (h: number): string =>
  h < 1 ? fine.format(h) : h < 10 ? decimal.format(h) : integer.format(h);
export const formatPct = (p: number): string => `${decimal.format(p)} %`;
export const formatInr = (n: number): string => rupees.format(n);
export const formatMs = (ms: number): string =>
  ms >= 10_000 ? `${decimal.format(ms / 1000)} s` : `${integer.format(ms)} ms`;
export const formatTime = (iso: string): string => time.format(new Date(iso));

export function formatDateTime(iso: string | null): string {
  return iso ? dateTime.format(new Date(iso)) : '—';
}

/** "+12.5 %" / "−3.0 %": the sign always shown, as a change. */
export function formatDelta(p: number): string {
  const sign = p > 0 ? '+' : p < 0 ? '−' : '±';
  return `${sign}${decimal.format(Math.abs(p))} %`;
}
