import type { Request } from 'express';
import { InvalidArgumentError } from '@custos/service-kit';

/** A whole-number query parameter in [min, max]; a 400 naming it otherwise. */
export function intParam(req: Request, name: string, fallback: number, min: number, max: number): number {
  const v = req.query[name];
  if (v === undefined) return fallback;
  if (typeof v !== 'string' || !/^\d{1,10}$/.test(v) || Number(v) < min || Number(v) > max) {
    throw new InvalidArgumentError(name, `${name} must be an integer from ${min} to ${max}`);
  }
  return Number(v);
}
