import type { ComponentChildren } from 'preact';
import { useId } from 'preact/hooks';
import { formatDelta } from '../format.js';

/** A titled region of a page: its heading names it for screen readers. */
export function Card({
  title,
  actions,
  children,
  wide = false,
}: {
  title: string;
  actions?: ComponentChildren;
  children: ComponentChildren;
  wide?: boolean;
}) {
  const id = useId();
  return (
    <section class={wide ? 'card wide' : 'card'} aria-labelledby={id}>
      <header class="card-head">
        <h2 id={id}>{title}</h2>
        {actions && <div class="card-actions">{actions}</div>}
      </header>
      {children}
    </section>
  );
}

/** A KPI: its value and, when given, the week-over-week change. */
export function Tile({ label, value, delta }: { label: string; value: string; delta?: number }) {
  const trend = delta === undefined ? '' : delta > 0 ? 'up' : delta < 0 ? 'down' : 'flat';
  return (
    <div class="tile" role="group" aria-label={label}>
      <div class="tile-label">{label}</div>
      <div class="tile-value" data-testid={`tile-${label}`}>
        {value}
      </div>
      {delta !== undefined && (
        <div class={`tile-delta ${trend}`} title="Last 7 days against the 7 days before">
          {formatDelta(delta)} <span class="visually-hidden">week over week</span>
          <span aria-hidden="true"> wow</span>
        </div>
      )}
    </div>
  );
}

export function Badge({
  tone,
  children,
}: {
  tone: 'critical' | 'warning' | 'info' | 'ok' | 'muted';
  children: ComponentChildren;
}) {
  return <span class={`badge badge-${tone}`}>{children}</span>;
}
