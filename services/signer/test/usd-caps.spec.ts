import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { Interface } from 'ethers';
import { createDatabase, createLogger, createPool, migrateSchema } from '@custos/service-kit';
import { createTestDatabase } from '@custos/service-kit/testing';
import { SCHEMA } from '../src/db/schema';
import { GuardrailLedger } from '../src/guardrails/guardrail-ledger';
import { PriceOracle, StaticPrices } from '../src/prices/price-source';
import { USD_BUCKET, USDC_BUCKET, UsdCaps } from '../src/prices/usd-caps';

const logger = createLogger({ service: 'signer-test', level: 'silent' });
const ETH = 10n ** 18n;
const USDC = `0x${'a0'.repeat(20)}`;
const ERC20 = new Interface([
  'function transfer(address to, uint256 amount)',
  'function approve(address spender, uint256 amount)',
]);

// The money caps in Postgres: spend valued at the oracle's price and reserved in the guardrail
// ledger's USD and USDC rows under their lock, so parallel transactions cannot pass a cap.
describe('USD caps in Postgres', () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let pool: ReturnType<typeof createPool>;
  let ledger: GuardrailLedger;
  let caps: UsdCaps;

  beforeAll(async () => {
    database = await createTestDatabase('custos_signer_usd');
    pool = createPool(database.url, 24, logger, 'signer-test');
    await migrateSchema(pool, { schema: SCHEMA, migrationsFolder: path.join(__dirname, '..', 'migrations') });
    ledger = new GuardrailLedger(createDatabase(pool));
    caps = new UsdCaps({
      ledger,
      oracle: new PriceOracle(
        [
          new StaticPrices(
            new Map([
              ['ETH', 2_000_000_000n],
              ['USDC', 1_000_000n],
            ]),
          ),
        ],
        3_600_000,
      ),
      usdc: new Map([['anvil', USDC]]),
      logger,
    });
  });
  afterAll(async () => {
    await pool?.end();
    await database?.drop();
  });

  const spend = (agentId: string, value: bigint, over: Record<string, unknown> = {}) => ({
    orgId: randomUUID(),
    agentId,
    chainName: 'anvil',
    nativeCurrency: 'ETH',
    decimals: 18,
    value,
    to: `0x${'11'.repeat(20)}`,
    data: '0x',
    ...over,
  });
  const usdToday = async (agentId: string, bucket = USD_BUCKET) =>
    (await ledger.today(agentId)).find((r) => r.chainName === bucket)?.spent ?? 0n;

  it('20 parallel $200 transactions against a $1,000 day admit exactly 5, the rest 403 usd_daily_limit_exceeded', async () => {
    const agentId = randomUUID();
    const results = await Promise.allSettled(
      Array.from({ length: 20 }, () => caps.admit(spend(agentId, ETH / 10n), { usd: 1_000_000_000n })),
    );
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(5);
    for (const r of results.filter((x) => x.status === 'rejected'))
      expect((r as PromiseRejectedResult).reason).toMatchObject({
        type: 'guardrail_violation',
        field: 'usd_daily_limit_usd',
        extensions: { reason_code: 'usd_daily_limit_exceeded' },
      });
    expect(await usdToday(agentId)).toBe(1_000_000_000n);
  });

  it('gives a reservation back once, and judges without reserving for a transaction about to wait for a human', async () => {
    const agentId = randomUUID();
    const [id] = await caps.admit(spend(agentId, ETH / 4n), { usd: 600_000_000n });
    expect(await usdToday(agentId)).toBe(500_000_000n);
    // Judged only: a $200 spend would pass the $600 cap, refused, nothing taken either way.
    await expect(caps.admit(spend(agentId, ETH / 10n), { usd: 600_000_000n }, false)).rejects.toMatchObject({
      type: 'guardrail_violation',
    });
    expect(await caps.admit(spend(agentId, ETH / 20n), { usd: 600_000_000n }, false)).toEqual([]);
    expect(await usdToday(agentId)).toBe(500_000_000n);
    await caps.release([id!], 'test');
    await caps.release([id!], 'test again');
    expect(await usdToday(agentId)).toBe(0n);
  });

  it('counts a USDC transfer at face value against usdc_daily_limit_usd, and at its price against the USD cap', async () => {
    const agentId = randomUUID();
    const usdcSpend = (amount: bigint) =>
      spend(agentId, 0n, {
        to: USDC,
        data: ERC20.encodeFunctionData('transfer', [`0x${'22'.repeat(20)}`, amount]),
      });
    const both = { usd: 100_000_000n, usdc: 50_000_000n };
    await caps.admit(usdcSpend(30_000_000n), both);
    expect(await usdToday(agentId, USDC_BUCKET)).toBe(30_000_000n);
    expect(await usdToday(agentId)).toBe(30_000_000n);
    await expect(caps.admit(usdcSpend(25_000_000n), both)).rejects.toMatchObject({
      field: 'usdc_daily_limit_usd',
      extensions: { reason_code: 'usdc_daily_limit_exceeded' },
    });
    // The refused one took nothing from either row.
    expect(await usdToday(agentId, USDC_BUCKET)).toBe(30_000_000n);
    expect(await usdToday(agentId)).toBe(30_000_000n);
    // An allowance counts as moved: the spender could take it with its own transferFrom.
    const approve = spend(agentId, 0n, {
      to: USDC,
      data: ERC20.encodeFunctionData('approve', [`0x${'22'.repeat(20)}`, 25_000_000n]),
    });
    await expect(caps.admit(approve, both)).rejects.toMatchObject({
      extensions: { reason_code: 'usdc_daily_limit_exceeded' },
    });
    // The same call to another contract is no USDC.
    expect(
      await caps.admit({ ...usdcSpend(25_000_000n), to: `0x${'33'.repeat(20)}` }, { usdc: 50_000_000n }),
    ).toEqual([]);
  });

  it('refuses rather than guesses: a currency without a price is 503 price_unavailable under a USD cap only', async () => {
    const agentId = randomUUID();
    const sol = spend(agentId, 10n ** 9n, { chainName: 'solana', nativeCurrency: 'SOL', decimals: 9 });
    await expect(caps.admit(sol, { usd: 1_000_000_000n })).rejects.toMatchObject({
      kind: 'unavailable',
      type: 'price_unavailable',
    });
    // Without a USD cap nothing needs a price.
    expect(await caps.admit(sol, { usdc: 1_000_000n })).toEqual([]);
    expect(await caps.admit(sol, {})).toEqual([]);
  });
});
