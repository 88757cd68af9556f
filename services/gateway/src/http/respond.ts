import type { Response } from 'express';

/**
 * Answers with a JSON body, as `res.status(status).json(body)` does here (no ETag, no JSON
 * settings) but written directly: the same status, `Content-Type` (charset utf-8) and
 * `Content-Length`, the body `JSON.stringify` gives. Never 304: a conditional GET
 * (`If-None-Match: *`) of a secret is answered in full, since the read was already counted and
 * audited by the time the answer is written (Express's freshness check would have sent no body).
 */
export function sendJson(
  res: Response,
  status: number,
  body: unknown,
  contentType = 'application/json; charset=utf-8',
): void {
  const text = JSON.stringify(body);
  res.statusCode = status;
  res.setHeader('Content-Type', contentType);
  res.setHeader('Content-Length', Buffer.byteLength(text));
  res.end(text);
}
