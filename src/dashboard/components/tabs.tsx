import type { ComponentChildren } from 'preact';

export interface Tab {
  id: string;
  label: string;
}

/** WAI-ARIA tabs: arrow keys move between them. */
export function Tabs({
  label,
  tabs,
  active,
  onChange,
  children,
}: {
  label: string;
  tabs: readonly Tab[];
  active: string;
  onChange: (id: string) => void;
  children: ComponentChildren;
}) {
  const move = (delta: number): void => {
    const i = tabs.findIndex((t) => t.id === active);
    const next = tabs[(i + delta + tabs.length) % tabs.length];
    if (next) {
      onChange(next.id);
      document.getElementById(`tab-${next.id}`)?.focus();
    }
  };
  return (
    <div class="tabs">
      <div role="tablist" aria-label={label}>
        {tabs.map((t) => (
          <button
            key={t.id}
            id={`tab-${t.id}`}
            role="tab"
            type="button"
            aria-selected={t.id === active}
            aria-controls={`panel-${t.id}`}
            tabIndex={t.id === active ? 0 : -1}
            onClick={() => onChange(t.id)}
            onKeyDown={(e) => {
              if (e.key === 'ArrowRight') move(1);
              if (e.key === 'ArrowLeft') move(-1);
            }}
          >
            {t.label}
          </button>
        ))}
      </div>
      <div role="tabpanel" id={`panel-${active}`} aria-labelledby={`tab-${active}`}>
        {children}
      </div>
    </div>
  );
}
