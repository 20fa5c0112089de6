import { errorBody, errorStatus } from '../errors.js';
import type { HttpReply, Route } from '../http/types.js';
import { rateHeaders } from '../http/rate-limit.js';
import type { Ingest } from './ingest.js';

export function ingestRoutes(ingest: Ingest): Route[] {
  return [
    {
      method: 'POST',
      path: '/v1/ingest/events',
      async handler(req): Promise<HttpReply> {
        const out = await ingest.run(req, { beacon: false });
        const headers = rateHeaders(out.rate);
        if (out.kind === 'answer') return { status: 200, headers, body: out.answer };
        if (out.code === 'rate_limited') headers['Retry-After'] = String(out.rate.resetSeconds);
        if (out.retryAfterSeconds !== undefined) headers['Retry-After'] = String(out.retryAfterSeconds);
        return {
          status: errorStatus(out.code),
          headers,
          body: errorBody(out.code, req.requestId, out.message, out.details),
          close: out.code === 'payload_too_large',
        };
      },
    },
    {
      // Browsers ignore the answer to sendBeacon: always 200, the outcome in the body for whoever looks.
      method: 'POST',
      path: '/v1/ingest/beacon',
      async handler(req): Promise<HttpReply> {
        const out = await ingest.run(req, { beacon: true });
        const headers = rateHeaders(out.rate);
        if (out.kind === 'answer') return { status: 200, headers, body: out.answer };
        const errors =
          out.code === 'validation_failed' && out.details
            ? out.details
            : [{ code: out.code, message: errorBody(out.code, req.requestId, out.message).error.message }];
        return {
          status: 200,
          headers,
          body: { accepted: 0, rejected: out.events, queued: false, errors, request_id: req.requestId },
          close: out.code === 'payload_too_large',
        };
      },
    },
  ];
}
