import { execFileSync } from 'node:child_process';
import path from 'node:path';

const ROOT = path.resolve(__dirname, '..', '..', '..');

interface Case {
  code: string;
  /** Where the code pretends to live (it need not exist; its imports must resolve). */
  filePath: string;
}

/**
 * Lints each case with ESLint's Node API and the workspace's own eslint.config.mjs. The config is
 * ESM and jest runs CommonJS here, so ESLint runs in a child process.
 */
type Messages = Array<{ ruleId: string | null; message: string }>;

function lint(cases: Case[]): Messages[] {
  const script = `
    import { ESLint } from 'eslint';
    let input = '';
    for await (const chunk of process.stdin) input += chunk;
    const eslint = new ESLint({ cwd: process.cwd() });
    const out = [];
    for (const c of JSON.parse(input)) {
      const [r] = await eslint.lintText(c.code, { filePath: c.filePath });
      out.push(r.messages.map((m) => ({ ruleId: m.ruleId, message: m.message })));
    }
    process.stdout.write(JSON.stringify(out));`;
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], {
    cwd: ROOT,
    input: JSON.stringify(cases),
    encoding: 'utf8',
    stdio: ['pipe', 'pipe', 'ignore'],
  });
  return JSON.parse(out) as Messages[];
}

const use = (from: string, name = 'x') => `import { ${name} } from '${from}';\nexport const y = ${name};\n`;

// Relative imports that resolve into another workspace package.
const CROSSING: Case[] = [
  // The hole the text patterns left: no `services/` or `packages/` in the specifier.
  { code: use('../../identity/src/config.js', 'configShape'), filePath: 'services/vault-crypto/src/x.ts' },
  { code: use('../../identity/src/config', 'configShape'), filePath: 'services/vault-crypto/src/x.ts' },
  { code: use('../../service-kit/src/cidr.js', 'parseIp'), filePath: 'packages/auth/src/x.ts' },
  {
    code: use('../../webhook-dispatcher/src/webhooks/webhook-fns', 'newSecret'),
    filePath: 'services/audit/src/x.ts',
  },
  {
    code: use('../../../services/gateway/src/http/rate-limit.js', 'tokenBucket'),
    filePath: 'tools/e2e/test/x.spec.ts',
  },
];

// Imports within a package, and through a declared dependency's exports.
const LEGAL: Case[] = [
  { code: use('./config.js', 'configShape'), filePath: 'services/vault-crypto/src/x.ts' },
  { code: use('../src/config', 'configShape'), filePath: 'services/vault-crypto/test/x.spec.ts' },
  { code: use('@custos/service-kit', 'isUuid'), filePath: 'services/vault-crypto/src/x.ts' },
  { code: use('../src/api', 'api'), filePath: 'tools/e2e/test/x.spec.ts' },
];

const UNDECLARED: Case = { code: use('ioredis', 'Redis'), filePath: 'services/billing/src/x.ts' };

describe('package boundaries hold on resolved paths, not on import text', () => {
  let crossing: Messages[];
  let legal: Messages[];
  let undeclared: Messages;

  beforeAll(() => {
    // One ESLint run for every case: loading the config and its resolver is the slow part.
    const all = lint([...CROSSING, ...LEGAL, UNDECLARED]);
    crossing = all.slice(0, CROSSING.length);
    legal = all.slice(CROSSING.length, CROSSING.length + LEGAL.length);
    undeclared = all.at(-1)!;
  }, 120_000);

  it('refuses relative imports that resolve into another workspace package, however spelled', () => {
    crossing.forEach((messages, i) => {
      expect({ case: CROSSING[i], rules: messages.map((m) => m.ruleId) }).toEqual({
        case: CROSSING[i],
        rules: expect.arrayContaining(['import-x/no-relative-packages']),
      });
    });
    expect(crossing[0]![0]!.message).toContain('@custos/identity');
  });

  it('lets imports within a package and through declared dependencies pass', () => {
    expect(legal).toEqual(LEGAL.map(() => []));
  });

  it('refuses a dependency the package does not declare', () => {
    expect(undeclared.map((m) => m.ruleId)).toContain('import-x/no-extraneous-dependencies');
  });
});
