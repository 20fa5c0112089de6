import { formatDateTime } from '../format.js';
import { ConfirmButton } from './button.js';
import { Badge } from './card.js';

/** A credential's state in its table: when it was revoked, or the two-step revoke. */
export function RevokeStatus({
  name,
  revokedAt,
  busy,
  onRevoke,
}: {
  name: string;
  revokedAt: string | null;
  busy: boolean;
  onRevoke: () => void;
}) {
  return revokedAt ? (
    <Badge tone="muted">revoked {formatDateTime(revokedAt)}</Badge>
  ) : (
    <ConfirmButton label="Revoke" confirmLabel={`Revoke ${name}`} busy={busy} onConfirm={onRevoke} />
  );
}
