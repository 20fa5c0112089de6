import { errorBody, errorStatus } from '../errors.js';
import type { HttpReply, HttpRequest, Route } from '../http/types.js';
import { rateHeaders } from '../http/rate-limit.js';
import type { Ingest, IngestOutcome } from './ingest.js';

function answer(req: HttpRequest, out: IngestOutcome): HttpReply {
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
}

export function ingestRoutes(ingest: Ingest): Route[] {
  return [
    {
      method: 'POST',
      path: '/v1/ingest/events',
      async handler(req): Promise<HttpReply> {
        return answer(req, await ingest.run(req, 'events'));
      },
    },
    {
      // CMCD reporters retry on 429 and 5xx and give the target up for the session on 410 (docs/cmcd.md "Answers").
      method: 'POST',
      path: '/v1/ingest/cmcd',
      async handler(req): Promise<HttpReply> {
        const out = await ingest.run(req, 'cmcd');
        return answer(
          req,
          out.kind === 'reject' && out.code === 'invalid_api_key' ? { ...out, code: 'api_key_gone' } : out,
        );
      },
    },
    {
      // Browsers ignore the answer to sendBeacon: always 200, the outcome in the body for whoever looks.
      method: 'POST',
      path: '/v1/ingest/beacon',
      async handler(req): Promise<HttpReply> {
        const out = await ingest.run(req, 'beacon');
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
