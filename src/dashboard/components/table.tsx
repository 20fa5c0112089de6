import type { ComponentChildren } from 'preact';

export interface Column<T> {
  header: string;
  cell: (row: T) => ComponentChildren;
  numeric?: boolean;
}

/** A table that scrolls sideways on narrow screens rather than squeezing its columns. */
export function DataTable<T>({
  caption,
  columns,
  rows,
  rowKey,
  empty,
}: {
  caption: string;
  columns: ReadonlyArray<Column<T>>;
  rows: readonly T[];
  rowKey: (row: T) => string;
  empty: string;
}) {
  return (
    <div class="table-wrap" tabIndex={0} role="region" aria-label={caption}>
      <table>
        <caption class="visually-hidden">{caption}</caption>
        <thead>
          <tr>
            {columns.map((c) => (
              <th key={c.header} scope="col" class={c.numeric ? 'num' : undefined}>
                {c.header}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows.length === 0 ? (
            <tr>
              <td colSpan={columns.length} class="empty">
                {empty}
              </td>
            </tr>
          ) : (
            rows.map((r) => (
              <tr key={rowKey(r)}>
                {columns.map((c) => (
                  <td key={c.header} class={c.numeric ? 'num' : undefined}>
                    {c.cell(r)}
                  </td>
                ))}
              </tr>
            ))
          )}
        </tbody>
      </table>
    </div>
  );
}

/** Previous / next over a list the API pages with limit, offset and X-Total-Count. */
export function Pager({
  offset,
  limit,
  total,
  onChange,
  label,
}: {
  offset: number;
  limit: number;
  total: number;
  onChange: (offset: number) => void;
  label: string;
}) {
  if (total <= limit) return null;
  return (
    <nav class="pager" aria-label={`${label} pages`}>
      <button
        type="button"
        class="btn btn-quiet"
        disabled={offset === 0}
        onClick={() => onChange(Math.max(0, offset - limit))}
      >
        Previous
      </button>
      <span>
        {offset + 1}–{Math.min(total, offset + limit)} of {total}
      </span>
      <button
        type="button"
        class="btn btn-quiet"
        disabled={offset + limit >= total}
        onClick={() => onChange(offset + limit)}
      >
        Next
      </button>
    </nav>
  );
}
