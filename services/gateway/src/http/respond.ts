import type { Response } from 'express';

/**
 * Answers with a JSON body, as `res.status(status).json(body)` does here (no ETag, no JSON
 * settings) but written directly: the same status, `Content-Type` (charset utf-8) and
 * `Content-Length`, the body `JSON.stringify` gives. A 2xx to a conditional GET still goes
 * through Express, which may answer it 304 from freshness.
 */
export function sendJson(
  res: Response,
  status: number,
  body: unknown,
  contentType = 'application/json; charset=utf-8',
): void {
  const h = res.req.headers;
  if (
    status >= 200 &&
    status < 300 &&
    (h['if-none-match'] !== undefined || h['if-modified-since'] !== undefined)
  ) {
    res.status(status).type(contentType).json(body);
    return;
  }
  const text = JSON.stringify(body);
  res.statusCode = status;
  res.setHeader('Content-Type', contentType);
  res.setHeader('Content-Length', Buffer.byteLength(text));
  res.end(text);
}
