import { stat } from 'node:fs/promises';
import type { ControlPlane } from '../control/control-plane.js';
import { plans } from '../control/plans.js';
import { replyError } from '../http/server.js';
import { FileBody, type HttpReply, type Route } from '../http/types.js';
import { guarded, type Authenticator } from './auth.js';
import { readJson } from './body.js';
import { TooManyExportsError, type ExportRecord, type ExportService } from './exports.js';

const maxDays = 31;
const maxEventTypes = 50;
const retryAfterSeconds = 30;
const dayPattern = /^(\d{4})-(\d{2})-(\d{2})$/;

/** Midnight UTC of a real calendar day `YYYY-MM-DD`, or null (2026-02-30 is not one). */
function dayMs(day: string): number | null {
  const m = dayPattern.exec(day);
  if (!m) return null;
  const ms = Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]));
  return new Date(ms).toISOString().slice(0, 10) === day ? ms : null;
}

/** An export as the API answers it: the link is signed afresh on every read, valid one hour or until the file goes. */
function view(r: ExportRecord, baseUrl: string, exports: ExportService, now = Date.now()): Record<string, unknown> {
  const fileExpires = r.expires_at === null ? 0 : Date.parse(r.expires_at);
  const downloadable = r.status === 'ready' && fileExpires > now;
  const signed = downloadable ? exports.link(r, baseUrl, fileExpires, now) : null;
  return {
    export_id: r.export_id,
    status: r.status,
    url: signed ? signed.url : null,
    expires_at: signed ? new Date(signed.expiresAt).toISOString() : r.status === 'ready' ? r.expires_at : null,
    rows: r.rows,
    bytes: r.bytes,
    from: r.from,
    to: r.to,
    event_types: r.event_types,
    created_at: r.created_at,
    finished_at: r.finished_at,
    error: r.error,
  };
}

/** Raw event export to Parquet (docs/export.md): enterprise plans, scope analytics:read, one tenant's own exports. */
export function exportRoutes(
  auth: Authenticator,
  control: ControlPlane,
  exports: ExportService,
  publicBaseUrl: string,
): Route[] {
  return [
    {
      method: 'POST',
      path: '/v1/analytics/export',
      handler: guarded(auth, 'analytics:read', async (req, who) => {
        const tenant = await control.getTenant(who.tenant);
        if (!tenant || !plans[tenant.plan].export)
          return replyError(
            req,
            'plan_required',
            `Exports need the enterprise plan; this tenant is on ${tenant?.plan ?? 'no plan'}`,
          );
        const body = await readJson(req, {
          from: { type: 'string', required: true },
          to: { type: 'string', required: true },
          event_types: { type: 'string[]', required: false },
        });
        if (!body.ok) return body.error;
        const { from, to } = body.value;
        const bad = (message: string, field: string): HttpReply =>
          replyError(req, 'invalid_request', message, [{ field }]);
        const fromMs = dayMs(from);
        const toMs = dayMs(to);
        if (fromMs === null) return bad('from must be a date YYYY-MM-DD', 'from');
        if (toMs === null) return bad('to must be a date YYYY-MM-DD', 'to');
        if (toMs < fromMs) return bad('to must not be before from', 'to');
        if ((toMs - fromMs) / 86_400_000 + 1 > maxDays)
          return bad(`a range covers at most ${maxDays} days, from and to included`, 'to');
        const types = [...new Set(body.value.event_types ?? [])];
        if (types.length > maxEventTypes || types.some((t) => t.length === 0 || t.length > 512)) {
          return bad(`event_types holds at most ${maxEventTypes} names of 1 to 512 characters`, 'event_types');
        }
        try {
          const r = await exports.create(who.tenant, from, to, types);
          return { status: 202, body: { export_id: r.export_id, status: r.status } };
        } catch (err) {
          if (err instanceof TooManyExportsError) {
            // A guess: a month of a busy tenant's events takes some seconds to write.
            return { ...replyError(req, 'too_many_exports'), headers: { 'Retry-After': String(retryAfterSeconds) } };
          }
          throw err;
        }
      }),
    },
    {
      method: 'GET',
      path: '/v1/analytics/export/{id}',
      handler: guarded(auth, 'analytics:read', async (req, who) => {
        const r = await exports.get(req.params.id ?? '');
        // Another tenant's export is answered as if it did not exist.
        if (!r || r.tenant !== who.tenant) return replyError(req, 'not_found', 'no such export');
        return { status: 200, body: view(r, publicBaseUrl, exports) };
      }),
    },
    {
      method: 'GET',
      path: '/v1/exports/{id}/file',
      handler: async (req) => {
        const id = req.params.id ?? '';
        // The signature is the only credential: checked before anything about the export is looked up.
        if (!exports.verify(id, req.query.get('expires'), req.query.get('signature')))
          return replyError(req, 'invalid_signature');
        const r = await exports.get(id);
        const size = await stat(exports.filePath(id)).then(
          (s) => s.size,
          () => null,
        );
        // Past its 24 hours a file may linger until the next sweep; it is gone all the same.
        if (
          !r ||
          r.status !== 'ready' ||
          r.expires_at === null ||
          Date.parse(r.expires_at) <= Date.now() ||
          size === null
        )
          return replyError(req, 'not_found', 'the export file is gone (files are kept 24 hours)');
        return {
          status: 200,
          headers: {
            'Content-Type': 'application/vnd.apache.parquet',
            'Content-Disposition': `attachment; filename="${r.tenant}-${r.from}-${r.to}.parquet"`,
            'Cache-Control': 'private, no-store',
          },
          body: new FileBody(exports.filePath(id), size),
        };
      },
    },
  ];
}
