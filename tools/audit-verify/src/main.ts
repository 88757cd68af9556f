#!/usr/bin/env node
import { existsSync, readFileSync } from 'node:fs';
import { type AuditExport, type ExportedCheckpoint, readPublicKey, verifyExport } from './verify.js';

const USAGE = `usage: custos-audit-verify <export.json> --public-key <file|base64>
         [--checkpoint <file>]... [--hmac-key [<version>:]<file|base64>]...

Checks an audit export (GET /v1/audit/export) offline:
  - every record links to the one before it from the first, without gaps, up to the export's head;
  - every checkpoint (the export's, and each --checkpoint file: one checkpoint or a
    GET /v1/audit/checkpoints answer kept from earlier) is signed by the public key, and the record
    at its position carries its head hash: records removed from the end are caught;
  - with --hmac-key (base64 of AUDIT_HMAC_KEY; version 1 unless given as <version>:<key>), each
    record's HMAC is recomputed, so edited contents are caught too. Without it, contents are not
    checked: only that the chain of hashes is the one the checkpoints signed.
Prints a JSON report; exits 0 when valid, 1 when not, 2 on a usage error.`;

// A value given inline or as a file.
function valueOf(arg: string): string {
  return existsSync(arg) ? readFileSync(arg, 'utf8') : arg;
}

function checkpointsOf(json: unknown): ExportedCheckpoint[] {
  if (Array.isArray(json)) return json as ExportedCheckpoint[];
  const o = json as { checkpoints?: ExportedCheckpoint[] };
  return Array.isArray(o.checkpoints) ? o.checkpoints : [json as ExportedCheckpoint];
}

function main(argv: string[]): number {
  let file: string | undefined;
  let publicKey: string | undefined;
  const extra: ExportedCheckpoint[] = [];
  const hmacKeys = new Map<number, Buffer>();
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const next = () => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${a} needs a value`);
      return v;
    };
    if (a === '--public-key') publicKey = valueOf(next());
    else if (a === '--checkpoint') extra.push(...checkpointsOf(JSON.parse(readFileSync(next(), 'utf8'))));
    else if (a === '--hmac-key') {
      const v = next();
      const m = /^(\d+):(.*)$/s.exec(v);
      const key = Buffer.from(valueOf(m ? m[2]! : v).trim(), 'base64');
      if (key.length !== 32) throw new Error('--hmac-key must be base64 of 32 bytes');
      hmacKeys.set(m ? Number(m[1]) : 1, key);
    } else if (a === '--help' || a === '-h') {
      process.stdout.write(`${USAGE}\n`);
      return 0;
    } else if (!file && !a.startsWith('--')) file = a;
    else throw new Error(`unknown argument ${a}`);
  }
  if (!file || !publicKey) throw new Error('an export file and --public-key are required');
  const exp = JSON.parse(readFileSync(file, 'utf8')) as AuditExport;
  const report = verifyExport(exp, readPublicKey(publicKey), { extraCheckpoints: extra, hmacKeys });
  process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  return report.valid ? 0 : 1;
}

try {
  process.exitCode = main(process.argv.slice(2));
} catch (err) {
  process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n\n${USAGE}\n`);
  process.exitCode = 2;
}
