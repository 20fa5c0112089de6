import { createHash, createHmac } from 'node:crypto';

/**
 * Where exports go when `EXPORT_S3_URL` is set: any S3-compatible store, addressed path-style
 * (`<endpoint>/<bucket>/<key>`), which AWS S3, MinIO, Cloudflare R2, Ceph and others all accept.
 */
export interface S3Target {
  /** scheme://host[:port] */
  endpoint: string;
  bucket: string;
  /** Key prefix, '' or ending in '/'. */
  prefix: string;
  region: string;
  accessKeyId: string;
  secretAccessKey: string;
}

/**
 * `EXPORT_S3_URL`: `https://<access key id>:<secret access key>@<host>[:port]/<bucket>[/<prefix>][?region=<region>]`
 * (credentials URL-encoded; region `us-east-1` when not given). Throws a message that says what is wrong.
 */
export function parseS3Url(text: string): S3Target {
  let u: URL;
  try {
    u = new URL(text);
  } catch {
    throw new Error(
      'EXPORT_S3_URL (export_s3_url) is not a URL; expected https://KEY:SECRET@host/bucket[/prefix][?region=R]',
    );
  }
  if (u.protocol !== 'https:' && u.protocol !== 'http:')
    throw new Error('EXPORT_S3_URL (export_s3_url) must be http:// or https://');
  if (!u.username || !u.password)
    throw new Error('EXPORT_S3_URL (export_s3_url) needs credentials: https://KEY:SECRET@host/bucket');
  const [bucket = '', ...rest] = u.pathname.split('/').filter(Boolean);
  if (!/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(bucket))
    throw new Error('EXPORT_S3_URL (export_s3_url) needs a bucket name as its first path segment');
  const unknown = [...u.searchParams.keys()].filter((k) => k !== 'region');
  if (unknown.length > 0)
    throw new Error(`EXPORT_S3_URL (export_s3_url): unknown parameter ${unknown[0]}; only region is read`);
  return {
    endpoint: `${u.protocol}//${u.host}`,
    bucket,
    prefix: rest.length > 0 ? `${rest.join('/')}/` : '',
    region: u.searchParams.get('region') ?? 'us-east-1',
    accessKeyId: decodeURIComponent(u.username),
    secretAccessKey: decodeURIComponent(u.password),
  };
}

/** The object's URL, unsigned (what ClickHouse's `s3` table function is given, with the credentials beside it). */
export function objectUrl(t: S3Target, key: string): string {
  return `${t.endpoint}/${t.bucket}/${encodePath(t.prefix + key)}`;
}

// RFC 3986 unreserved characters stay; everything else is percent-encoded, as SigV4 requires.
const encode = (s: string): string =>
  encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
const encodePath = (key: string): string => key.split('/').map(encode).join('/');
const sha256 = (s: string): string => createHash('sha256').update(s).digest('hex');
const hmac = (key: string | Buffer, s: string): Buffer => createHmac('sha256', key).update(s).digest();

/**
 * A presigned URL (AWS Signature Version 4, query form) for `method` on `key`, valid `seconds` from `now`: the
 * download link of an export (GET), its size (HEAD), or its deletion (DELETE). Nothing but the URL is needed to use it.
 */
export function presign(
  t: S3Target,
  method: 'GET' | 'HEAD' | 'DELETE',
  key: string,
  seconds: number,
  now = Date.now(),
): string {
  const u = new URL(objectUrl(t, key));
  const stamp = new Date(now)
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d{3}/, '');
  const day = stamp.slice(0, 8);
  const scope = `${day}/${t.region}/s3/aws4_request`;
  const query: Array<[string, string]> = [
    ['X-Amz-Algorithm', 'AWS4-HMAC-SHA256'],
    ['X-Amz-Credential', `${t.accessKeyId}/${scope}`],
    ['X-Amz-Date', stamp],
    ['X-Amz-Expires', String(Math.max(1, Math.min(604_800, Math.floor(seconds))))],
    ['X-Amz-SignedHeaders', 'host'],
  ];
  const canonicalQuery = query
    .map(([k, v]) => `${encode(k)}=${encode(v)}`)
    .sort()
    .join('&');
  const canonical = [method, u.pathname, canonicalQuery, `host:${u.host}\n`, 'host', 'UNSIGNED-PAYLOAD'].join('\n');
  const toSign = ['AWS4-HMAC-SHA256', stamp, scope, sha256(canonical)].join('\n');
  const signingKey = hmac(hmac(hmac(hmac(`AWS4${t.secretAccessKey}`, day), t.region), 's3'), 'aws4_request');
  return `${u.origin}${u.pathname}?${canonicalQuery}&X-Amz-Signature=${hmac(signingKey, toSign).toString('hex')}`;
}
