import { createHash } from 'node:crypto';
import { TronResponder } from '@custos/chain-responders/tron';
import { CustosError } from '@custos/service-kit';
import { Signature, SigningKey } from 'ethers';
import { TronWeb, utils } from 'tronweb';
import type { ChainRecord } from '../../chains/chain-types.js';
import {
  ChainRpcError,
  type ChainEndpoint,
  type KeyView,
  type PrepareContext,
  type PreparedTransfer,
  type TransferInput,
} from '../../keys/chain-adapter.js';
import { tronAdapter } from './index.js';
import type { TronUnsigned } from './tron-transfer.js';

const ops = tronAdapter.transfers!;
const TRX = 1_000_000n;

const chain: ChainRecord = {
  id: 'c1',
  name: 'tron-nile',
  displayName: 'Tron Nile',
  chainId: 3448148188n,
  family: 'tron',
  rpcUrl: '',
  wsUrl: '',
  explorerUrl: '',
  nativeCurrency: 'TRX',
  nativeDecimals: 6,
  isTestnet: true,
  isEnabled: true,
  createdAt: new Date(),
  updatedAt: new Date(),
};

let node: TronResponder;
let ep: ChainEndpoint;

beforeEach(async () => {
  node = await TronResponder.start();
  node.produceBlock();
  ep = { chain: { ...chain, rpcUrl: node.url }, url: node.url, timeoutMs: 1500 };
});
afterEach(async () => {
  await node.close();
});

function newKey(): { privateKey: Buffer; key: KeyView } {
  const g = tronAdapter.generate();
  return { privateKey: g.privateKey, key: { address: g.address, publicKey: g.publicKey } };
}

function ctxOf(key: KeyView): PrepareContext {
  return { endpoint: ep, key, from: key.address, inputsInUse: async () => new Set<string>() };
}

async function prepare(key: KeyView, input: TransferInput): Promise<PreparedTransfer<TronUnsigned>> {
  const parsed = ops.parse(input, ep.chain);
  return (await ops.prepare(ctxOf(key), parsed)) as PreparedTransfer<TronUnsigned>;
}

async function signed(privateKey: Buffer, key: KeyView, p: PreparedTransfer) {
  return ops.sign(privateKey, p, { chain: ep.chain, key });
}

/** Checks a signed transaction apart from the adapter: id, encoding, signature → the key's address. */
function verifySigned(signedTx: string, key: KeyView) {
  const tx = JSON.parse(signedTx) as {
    txID: string;
    raw_data: Record<string, unknown>;
    raw_data_hex: string;
    signature: string[];
  };
  expect(createHash('sha256').update(Buffer.from(tx.raw_data_hex, 'hex')).digest('hex')).toBe(tx.txID);
  const pb = utils.transaction.txJsonToPb({ raw_data: tx.raw_data, visible: false });
  expect(utils.transaction.txPbToRawDataHex(pb).toLowerCase()).toBe(tx.raw_data_hex);
  expect(tx.signature).toHaveLength(1);
  const sig = tx.signature[0]!;
  const pub = SigningKey.recoverPublicKey(
    `0x${tx.txID}`,
    Signature.from({
      r: `0x${sig.slice(0, 64)}`,
      s: `0x${sig.slice(64, 128)}`,
      v: parseInt(sig.slice(128), 16),
    }),
  );
  expect(pub).toBe(key.publicKey);
  expect(TronWeb.address.fromHex(utils.crypto.ecRecover(tx.txID, sig))).toBe(key.address);
  return tx;
}

function expectInvalid(err: unknown, field: string, type?: string): void {
  expect(err).toBeInstanceOf(CustosError);
  const e = err as CustosError & { details?: Record<string, unknown> };
  const flat = JSON.stringify({ ...e, message: e.message });
  expect(flat).toContain(`"field":"${field}"`);
  if (type) expect(flat).toContain(`"type":"${type}"`);
}

async function refusal(p: Promise<unknown> | (() => unknown)): Promise<unknown> {
  try {
    await (typeof p === 'function' ? p() : p);
  } catch (err) {
    return err;
  }
  throw new Error('expected a refusal');
}

describe('tron TRX transfers against the local node', () => {
  it('prepares, signs, broadcasts and follows a TRX transfer to confirmed', async () => {
    const { privateKey, key } = newKey();
    const to = newKey().key.address;
    node.fund(key.address, 50n * TRX);
    const p = await prepare(key, { to, value: '1.5' });
    expect(p.value).toBe(1_500_000n);
    expect(p.to).toBe(to);
    expect(p.expiry?.kind).toBe('time_ms');
    expect(p.details.recipient_activated).toBe(false);
    // Unactivated recipient: account creation fees are in the most-it-pays figure.
    expect(p.fee).toBeGreaterThan(1_100_000n);
    const s = await signed(privateKey, key, p);
    const tx = verifySigned(s.signedTx, key);
    expect(s.txHash).toBe(tx.txID);
    const decoded = utils.deserializeTx.deserializeTransaction('TransferContract', tx.raw_data_hex);
    const dv = decoded.contract[0].parameter.value;
    expect({
      ...dv,
      owner_address: dv.owner_address.toLowerCase(),
      to_address: dv.to_address.toLowerCase(),
    }).toEqual({
      owner_address: TronWeb.address.toHex(key.address).toLowerCase(),
      to_address: TronWeb.address.toHex(to).toLowerCase(),
      amount: 1_500_000,
    });
    expect(await ops.status(ep, { ...s, expiry: p.expiry })).toEqual({ state: 'unknown' });
    await ops.broadcast(ep, s);
    expect(node.verified.map((v) => v.txID)).toEqual([s.txHash]);
    expect(node.verified[0]!.signer).toBe(key.publicKey);
    expect(await ops.status(ep, { ...s, expiry: p.expiry })).toEqual({ state: 'pending' });
    const block = node.produceBlock();
    const st = await ops.status(ep, { ...s, expiry: p.expiry });
    expect(st).toEqual({ state: 'confirmed', block: BigInt(block.number), fee: expect.any(BigInt) });
    const fee = (st as { fee: bigint }).fee;
    expect(fee).toBe(BigInt(node.infoOf(s.txHash).fee as number));
    expect(fee).toBeLessThanOrEqual(p.fee);
    expect(node.balanceOf(to)).toBe(1_500_000n);
    expect(node.balanceOf(key.address)).toBe(50n * TRX - 1_500_000n - fee);
  });

  it('puts a memo in raw_data.data as UTF-8 hex and counts the memo fee', async () => {
    const { privateKey, key } = newKey();
    const to = newKey().key.address;
    node.fund(key.address, 20n * TRX);
    node.fund(to, 1n);
    const p = await prepare(key, { to, value: '1000', memo: 'invoice 42 — ok' });
    expect(p.details.memo).toBe('invoice 42 — ok');
    expect(p.details.recipient_activated).toBe(true);
    const s = await signed(privateKey, key, p);
    const tx = verifySigned(s.signedTx, key);
    expect(Buffer.from(String(tx.raw_data.data), 'hex').toString('utf8')).toBe('invoice 42 — ok');
    await ops.broadcast(ep, s);
    node.produceBlock();
    expect(node.verified[0]!.memo).toBe('invoice 42 — ok');
    const st = await ops.status(ep, s);
    expect(st.state).toBe('confirmed');
    expect((st as { fee: bigint }).fee).toBeGreaterThanOrEqual(BigInt(node.fees.memoFee));
    expect(node.balanceOf(to)).toBe(1001n);
  });

  it('signs without broadcasting: the output parses and its signature is the key’s', async () => {
    const { privateKey, key } = newKey();
    node.fund(key.address, 5n * TRX);
    const p = await prepare(key, { to: newKey().key.address, value: '250000' });
    const s = await signed(privateKey, key, p);
    const tx = verifySigned(s.signedTx, key);
    expect(node.verified).toHaveLength(0);
    // The same RFC 6979 signature ethers makes over the txID (r ‖ s ‖ v with v = 27 + parity).
    const e = new SigningKey(`0x${privateKey.toString('hex')}`).sign(`0x${tx.txID}`);
    expect(tx.signature[0]).toBe(`${e.r.slice(2)}${e.s.slice(2)}${e.v.toString(16)}`);
  });

  it('refuses to sign what was not prepared or with another key', async () => {
    const { privateKey, key } = newKey();
    node.fund(key.address, 5n * TRX);
    const p = await prepare(key, { to: newKey().key.address, value: '250000' });
    // Amount changed in the JSON: it no longer encodes to the checked bytes.
    const bumped = structuredClone(p);
    (bumped.unsigned.tx.raw_data.contract[0].parameter.value as Record<string, number>).amount = 9_000_000;
    await expect(async () => signed(privateKey, key, bumped)).rejects.toThrow(/raw_data_hex/);
    // The prepared value changed: the bytes say otherwise.
    await expect(async () => signed(privateKey, key, { ...p, value: 1n })).rejects.toThrow(/amount/);
    await expect(async () => signed(privateKey, key, { ...p, to: newKey().key.address })).rejects.toThrow(
      /recipient/,
    );
    // Another key's private half.
    await expect(async () => signed(newKey().privateKey, key, p)).rejects.toThrow(/not the key/);
  });

  it('refuses what the key cannot pay: amount + fee over the balance, an unactivated sender', async () => {
    const { key } = newKey();
    const to = newKey().key.address;
    expectInvalid(await refusal(prepare(key, { to, value: '1' })), 'value', 'insufficient_funds');
    node.fund(key.address, 2n * TRX);
    node.fund(to, 1n);
    // 2 TRX cannot carry 2 TRX plus the bandwidth fee ("2.0": major units; "2" would be 2 sun).
    expectInvalid(await refusal(prepare(key, { to, value: '2.0' })), 'value', 'insufficient_funds');
    // …but 1 TRX to an activated account can be paid; to an unactivated one the 1.1 TRX creation fee cannot.
    await expect(prepare(key, { to, value: '1.0' })).resolves.toBeDefined();
    expectInvalid(
      await refusal(prepare(key, { to: newKey().key.address, value: '1.0' })),
      'value',
      'insufficient_funds',
    );
  });

  it('refuses malformed, wrong-network and foreign fields naming the field', async () => {
    const { key } = newKey();
    const to = newKey().key.address;
    const bad: Array<[TransferInput, string]> = [
      [{ to: 'TPL66VK2gCXNCD7EJg9pgJRfqcRazjhUZZ', value: '1' }, 'to'],
      [{ to: TronWeb.address.toHex(to), value: '1' }, 'to'],
      [{ to: '0x92f2d69f1e8f6b8d2f0c5bb1d5b0a42bd9b4c8a3', value: '1' }, 'to'],
      [{ to: 'tb1qw508d6qejxtdg4y5r3zarvary0c5xw7kxpjzsx', value: '1' }, 'to'],
      [{ to, value: '0' }, 'value'],
      [{ to, value: '1.0000001' }, 'value'],
      [{ to, value: 'abc' }, 'value'],
      [{ to, value: '1', memo: 'x'.repeat(513) }, 'memo'],
      [{ to, value: '1', feeLimitSun: 1000 }, 'fee_limit_sun'],
      [{ to, value: '1', destinationTag: 7 }, 'destination_tag'],
      [{ to, value: '1', feeRateSatPerVbyte: 3 }, 'fee_rate_sat_per_vbyte'],
      [{ to, value: '1', ttl: 100 }, 'ttl'],
      [{ to, value: '1', data: '0xabcd' }, 'data'],
      [{ to, value: '1', tokenDecimals: 6 }, 'token_decimals'],
      [{ to, value: '1', tokenMint: 'not-an-address' }, 'token_mint'],
      [{ to, value: '1', tokenMint: 'TPL66VK2gCXNCD7EJg9pgJRfqcRazjhUZY', feeLimitSun: 0 }, 'fee_limit_sun'],
      [
        { to, value: '1', tokenMint: 'TPL66VK2gCXNCD7EJg9pgJRfqcRazjhUZY', feeLimitSun: 15_000_000_001 },
        'fee_limit_sun',
      ],
    ];
    for (const [input, field] of bad) {
      expectInvalid(await refusal(() => ops.parse(input, ep.chain)), field);
    }
    // A memo of exactly 512 bytes is fine; a transfer to yourself is refused by prepare.
    expect(() => ops.parse({ to, value: '1', memo: 'é'.repeat(256) }, ep.chain)).not.toThrow();
    node.fund(key.address, 5n * TRX);
    expectInvalid(await refusal(prepare(key, { to: key.address, value: '1' })), 'to');
  });
});

describe('tron TRC-20 transfers against the local node', () => {
  it('transfers a token to confirmed, reading decimals and balanceOf from the contract', async () => {
    const { privateKey, key } = newKey();
    const to = newKey().key.address;
    node.fund(key.address, 200n * TRX);
    const usdt = node.deployToken({ symbol: 'USDT', decimals: 6 });
    node.mintToken(usdt, key.address, 10_000_000n);
    const p = await prepare(key, { to, value: '2.5', tokenMint: usdt, feeLimitSun: 30_000_000 });
    expect(p.value).toBe(2_500_000n);
    expect(p.details).toMatchObject({ token_mint: usdt, token_decimals: 6, fee_limit_sun: 30_000_000 });
    expect(p.fee).toBeGreaterThan(30_000_000n);
    const s = await signed(privateKey, key, p);
    const tx = verifySigned(s.signedTx, key);
    const d = utils.deserializeTx.deserializeTransaction('TriggerSmartContract', tx.raw_data_hex);
    expect(d.fee_limit).toBe(30_000_000);
    const v = d.contract[0].parameter.value;
    expect(v.contract_address.toLowerCase()).toBe(TronWeb.address.toHex(usdt).toLowerCase());
    expect(v.call_value).toBe(0);
    // transfer(to, 2.5 tokens) ABI-encoded, decoded with the chain library's ABI coder.
    expect(v.data.slice(0, 8).toLowerCase()).toBe('a9059cbb');
    const [toArg, amountArg] = utils.abi.decodeParams(
      [],
      ['address', 'uint256'],
      `0x${v.data.slice(8)}`,
      true,
    ) as [string, bigint];
    expect(TronWeb.address.fromHex(toArg)).toBe(to);
    expect(BigInt(amountArg.toString())).toBe(2_500_000n);
    await ops.broadcast(ep, s);
    node.produceBlock();
    const st = await ops.status(ep, { ...s, expiry: p.expiry });
    expect(st.state).toBe('confirmed');
    expect(node.tokenBalance(usdt, to)).toBe(2_500_000n);
    expect(node.tokenBalance(usdt, key.address)).toBe(7_500_000n);
    expect(node.verified[0]).toMatchObject({
      type: 'TriggerSmartContract',
      token: usdt,
      to,
      amount: 2_500_000n,
    });
  });

  it('uses the default fee limit of 100 TRX and refuses a token_decimals the contract contradicts', async () => {
    const { key } = newKey();
    node.fund(key.address, 200n * TRX);
    const tok = node.deployToken({ symbol: 'T18', decimals: 18 });
    node.mintToken(tok, key.address, 10n ** 20n);
    const p = await prepare(key, { to: newKey().key.address, value: '1.25', tokenMint: tok });
    expect(p.value).toBe(1_250_000_000_000_000_000n);
    expect(p.details.fee_limit_sun).toBe(100_000_000);
    expect(p.details.token_decimals).toBe(18);
    expectInvalid(
      await refusal(prepare(key, { to: newKey().key.address, value: '1', tokenMint: tok, tokenDecimals: 6 })),
      'token_decimals',
    );
  });

  it('refuses a token shortfall, no TRX for energy, a fee limit under the energy, and a non-contract', async () => {
    const { key } = newKey();
    const to = newKey().key.address;
    const tok = node.deployToken({ symbol: 'TK', decimals: 6 });
    node.mintToken(tok, key.address, 1_000_000n);
    node.fund(key.address, 1n);
    expectInvalid(
      await refusal(prepare(key, { to, value: '2', tokenMint: tok })),
      'value',
      'insufficient_funds',
    );
    expectInvalid(
      await refusal(prepare(key, { to, value: '1', tokenMint: tok })),
      'value',
      'insufficient_funds',
    );
    node.fund(key.address, 100n * TRX);
    // A new holder needs 29,650 energy × 420 sun ≈ 12.45 TRX: a 1 TRX limit would run out of energy.
    expectInvalid(
      await refusal(prepare(key, { to, value: '1', tokenMint: tok, feeLimitSun: 1_000_000 })),
      'fee_limit_sun',
    );
    expectInvalid(await refusal(prepare(key, { to, value: '1', tokenMint: to })), 'token_mint');
  });

  it('follows a transfer the contract reverts to failed (REVERT), fee spent', async () => {
    const { privateKey, key } = newKey();
    node.fund(key.address, 200n * TRX);
    const tok = node.deployToken({ symbol: 'TK', decimals: 6 });
    node.mintToken(tok, key.address, 1_000_000n);
    // Two transfers of the whole balance prepared before either is sent: the second reverts.
    const a = await prepare(key, { to: newKey().key.address, value: '1000000', tokenMint: tok });
    const b = await prepare(key, {
      to: newKey().key.address,
      value: '1000000',
      tokenMint: tok,
      memo: 'second',
    });
    const sa = await signed(privateKey, key, a);
    const sb = await signed(privateKey, key, b);
    await ops.broadcast(ep, sa);
    await ops.broadcast(ep, sb);
    node.produceBlock();
    expect((await ops.status(ep, sa)).state).toBe('confirmed');
    const st = await ops.status(ep, sb);
    expect(st).toMatchObject({ state: 'failed', reason: expect.stringMatching(/^REVERT/) });
    expect((st as { fee: bigint }).fee).toBeGreaterThan(0n);
  });
});

describe('tron review fixes', () => {
  it('refuses a TRC-20 transfer whose dry run reverts, with the decoded reason, before anything is signed', async () => {
    const { key } = newKey();
    node.fund(key.address, 200n * TRX);
    const tok = node.deployToken({ symbol: 'USDT', decimals: 6 });
    node.mintToken(tok, key.address, 5_000_000n);
    node.blacklist(tok, key.address);
    const err = await refusal(prepare(key, { to: newKey().key.address, value: '1', tokenMint: tok }));
    expect(err).toBeInstanceOf(ChainRpcError);
    expect((err as ChainRpcError).rejected).toBe(true);
    expect((err as ChainRpcError).message).toContain('Blacklistable: account is blacklisted');
    expect(node.verified).toEqual([]);
  });

  it('is pending until the block is solidified, then confirmed; a REVERT likewise fails only once solid', async () => {
    node.setSolidLag(2);
    const { privateKey, key } = newKey();
    node.fund(key.address, 200n * TRX);
    const tok = node.deployToken({ symbol: 'TK', decimals: 6 });
    node.mintToken(tok, key.address, 1_000_000n);
    const a = await prepare(key, { to: newKey().key.address, value: '1000000', tokenMint: tok });
    const b = await prepare(key, { to: newKey().key.address, value: '1000000', tokenMint: tok, memo: 'b' });
    const c = await prepare(key, { to: newKey().key.address, value: '1' });
    const [sa, sb, sc] = [
      await signed(privateKey, key, a),
      await signed(privateKey, key, b),
      await signed(privateKey, key, c),
    ];
    for (const x of [sa, sb, sc]) await ops.broadcast(ep, x);
    const block = node.produceBlock();
    // In a block on the full node, not solidified: neither confirmed nor failed yet.
    expect(node.infoOf(sb.txHash)).toMatchObject({ receipt: { result: 'REVERT' } });
    expect(await ops.status(ep, sa)).toEqual({ state: 'pending' });
    expect(await ops.status(ep, sb)).toEqual({ state: 'pending' });
    expect(await ops.status(ep, sc)).toEqual({ state: 'pending' });
    node.produceBlock();
    expect(await ops.status(ep, sc)).toEqual({ state: 'pending' });
    node.produceBlock();
    expect(await ops.status(ep, sa)).toMatchObject({ state: 'confirmed', block: BigInt(block.number) });
    expect(await ops.status(ep, sc)).toMatchObject({ state: 'confirmed', block: BigInt(block.number) });
    expect(await ops.status(ep, sb)).toMatchObject({
      state: 'failed',
      reason: 'REVERT: ERC20: transfer amount exceeds balance',
    });
  });

  it('a TRC-20 transfer the token answers false is failed, not confirmed', async () => {
    const { privateKey, key } = newKey();
    node.fund(key.address, 200n * TRX);
    const old = node.deployToken({ symbol: 'OLD', decimals: 6, shortfall: 'false' });
    node.mintToken(old, key.address, 1_000_000n);
    const a = await prepare(key, { to: newKey().key.address, value: '1000000', tokenMint: old });
    const b = await prepare(key, { to: newKey().key.address, value: '1000000', tokenMint: old, memo: 'b' });
    const sa = await signed(privateKey, key, a);
    const sb = await signed(privateKey, key, b);
    await ops.broadcast(ep, sa);
    await ops.broadcast(ep, sb);
    node.produceBlock();
    expect((await ops.status(ep, sa)).state).toBe('confirmed');
    expect(await ops.status(ep, sb)).toMatchObject({
      state: 'failed',
      reason: expect.stringContaining('returned false'),
    });
  });

  it('takes TRC-20 amounts over 2^64 - 1 and fraction digits by the contract’s decimals', async () => {
    const { privateKey, key } = newKey();
    node.fund(key.address, 200n * TRX);
    const t18 = node.deployToken({ symbol: 'T18', decimals: 18 });
    node.mintToken(t18, key.address, 10n ** 30n);
    const big = await prepare(key, {
      to: newKey().key.address,
      value: (10n ** 30n).toString(),
      tokenMint: t18,
    });
    expect(big.value).toBe(10n ** 30n);
    expect(big.value > 0xffffffffffffffffn).toBe(true);
    const s = await signed(privateKey, key, big);
    await ops.broadcast(ep, s);
    expect(node.verified[0]!.amount).toBe(10n ** 30n);
    // Seven fraction digits: fine for an 18-decimal token (no 6-decimal guess in parse).
    const p = await prepare(key, { to: newKey().key.address, value: '1.1234567', tokenMint: t18 });
    expect(p.value).toBe(1_123_456_700_000_000_000n);
    const t2 = node.deployToken({ symbol: 'T2', decimals: 2 });
    node.mintToken(t2, key.address, 10_000n);
    expectInvalid(
      await refusal(prepare(key, { to: newKey().key.address, value: '1.005', tokenMint: t2 })),
      'value',
    );
    // No decimals() on the contract: a decimal amount needs token_decimals; base units are fine.
    const nod = node.deployToken({ symbol: 'NOD', decimals: null });
    node.mintToken(nod, key.address, 10_000n);
    expectInvalid(
      await refusal(prepare(key, { to: newKey().key.address, value: '1.5', tokenMint: nod })),
      'token_decimals',
    );
    expect((await prepare(key, { to: newKey().key.address, value: '150', tokenMint: nod })).value).toBe(150n);
    expect(
      (await prepare(key, { to: newKey().key.address, value: '1.5', tokenMint: nod, tokenDecimals: 2 }))
        .value,
    ).toBe(150n);
    // TRX stays 64-bit.
    expectInvalid(
      await refusal(() => ops.parse({ to: newKey().key.address, value: (1n << 64n).toString() }, ep.chain)),
      'value',
    );
  });

  it('says what the key can spend as read from the chain (available)', async () => {
    const { key } = newKey();
    node.fund(key.address, 50n * TRX);
    const p = await prepare(key, { to: newKey().key.address, value: '1' });
    expect(p.available).toEqual({ native: 50n * TRX });
    const tok = node.deployToken({ symbol: 'TK', decimals: 6 });
    node.mintToken(tok, key.address, 7_000_000n);
    const t = await prepare(key, { to: newKey().key.address, value: '1', tokenMint: tok });
    expect(t.available).toEqual({ native: 50n * TRX, token: 7_000_000n });
    // The in-flight check counts what it is expected to burn (bandwidth and the dry run's energy),
    // not the whole fee limit: a key holding less than the 100 TRX default limit still sends.
    expect(t.fee).toBeGreaterThan(100n * TRX);
    expect(t.expectedFee).toBeGreaterThan(0n);
    expect(t.expectedFee!).toBeLessThan(t.available!.native);
  });
});

describe('tron node answers mapped', () => {
  async function oneSigned(value = '1') {
    const { privateKey, key } = newKey();
    node.fund(key.address, 10n * TRX);
    const p = await prepare(key, { to: newKey().key.address, value });
    return { p, s: await signed(privateKey, key, p), key };
  }

  it('a bad signature is a refusal (SIGERROR)', async () => {
    const { s } = await oneSigned();
    const tx = JSON.parse(s.signedTx);
    const other = newKey();
    tx.signature = [utils.crypto.signTransaction(other.privateKey, { txID: tx.txID }).signature[0]];
    const err = await refusal(ops.broadcast(ep, { ...s, signedTx: JSON.stringify(tx) }));
    expect(err).toBeInstanceOf(ChainRpcError);
    expect(err).toMatchObject({ rejected: true, alreadyKnown: false });
    expect((err as Error).message).toMatch(/SIGERROR.*not contained of permission/);
    expect(node.broadcasts).toEqual(['SIGERROR']);
  });

  it('the same bytes twice are already known (DUP_TRANSACTION_ERROR)', async () => {
    const { s } = await oneSigned();
    await ops.broadcast(ep, s);
    const err = await refusal(ops.broadcast(ep, s));
    expect(err).toMatchObject({ rejected: false, alreadyKnown: true });
  });

  it('a balance spent meanwhile is refused with the node’s decoded message (CONTRACT_VALIDATE_ERROR)', async () => {
    const { s, key } = await oneSigned('5');
    node.fund(key.address, -9n * TRX);
    const err = await refusal(ops.broadcast(ep, s));
    expect(err).toMatchObject({ rejected: true });
    expect((err as Error).message).toMatch(/CONTRACT_VALIDATE_ERROR.*balance is not sufficient/);
  });

  it('an expired transaction is refused, and once expired its status says so', async () => {
    const { s, p } = await oneSigned();
    node.advanceTime(120_000);
    node.produceBlock();
    const err = await refusal(ops.broadcast(ep, s));
    expect(err).toMatchObject({ rejected: true });
    expect((err as Error).message).toMatch(/TRANSACTION_EXPIRATION_ERROR/);
    expect(await ops.status(ep, { ...s, expiry: p.expiry })).toMatchObject({ state: 'expired' });
    // Without the expiry argument it is read from the signed transaction.
    expect(await ops.status(ep, { txHash: s.txHash, signedTx: s.signedTx })).toMatchObject({
      state: 'expired',
    });
  });

  it('a transaction dropped from the pool at expiration goes from pending to expired', async () => {
    const { s, p } = await oneSigned();
    await ops.broadcast(ep, s);
    expect((await ops.status(ep, { ...s, expiry: p.expiry })).state).toBe('pending');
    node.advanceTime(120_000);
    // A block that did not take it: the head's time is now past its expiration.
    node.produceBlock({ empty: true });
    expect(node.pendingIds()).toEqual([s.txHash]);
    expect((await ops.status(ep, { ...s, expiry: p.expiry })).state).toBe('expired');
    node.produceBlock();
    expect(node.pendingIds()).toEqual([]);
    expect(node.infoOf(s.txHash)).toEqual({});
    expect((await ops.status(ep, { ...s, expiry: p.expiry })).state).toBe('expired');
  });

  it('an unknown reference block is a refusal (TAPOS_ERROR)', async () => {
    const { s } = await oneSigned();
    const other = await TronResponder.start();
    try {
      const { key } = newKey();
      void key;
      const tx = JSON.parse(s.signedTx);
      other.fund(TronWeb.address.fromHex(tx.raw_data.contract[0].parameter.value.owner_address), 10n * TRX);
      const err = await refusal(ops.broadcast({ ...ep, url: other.url }, s));
      expect(err).toMatchObject({ rejected: true });
      expect((err as Error).message).toMatch(/TAPOS_ERROR/);
    } finally {
      await other.close();
    }
  });

  it('a 503 is not a refusal, and the next try goes through', async () => {
    const { s } = await oneSigned();
    node.failNext(1, 503, '/wallet/broadcasttransaction');
    const err = await refusal(ops.broadcast(ep, s));
    expect(err).toBeInstanceOf(ChainRpcError);
    expect(err).toMatchObject({ rejected: false, alreadyKnown: false });
    await ops.broadcast(ep, s);
    expect(node.verified).toHaveLength(1);
  });

  it('a node that stops answering times out: ChainRpcError, not a refusal', async () => {
    const { s } = await oneSigned();
    node.stopAnswering();
    const t0 = Date.now();
    const err = await refusal(ops.broadcast(ep, s));
    // The endpoint's 1.5 s timeout ended it.
    expect(Date.now() - t0).toBeGreaterThanOrEqual(1400);
    expect(err).toBeInstanceOf(ChainRpcError);
    expect(err).toMatchObject({ rejected: false, alreadyKnown: false });
    expect((err as Error).message).toMatch(/timed out/);
    const e2 = await refusal(ops.status(ep, s));
    expect(e2).toMatchObject({ rejected: false });
    const { key } = newKey();
    const e3 = await refusal(prepare(key, { to: newKey().key.address, value: '1' }));
    expect(e3).toBeInstanceOf(ChainRpcError);
    node.resume();
  });

  it('never puts the private key in a refusal or in what it hands back', async () => {
    const { privateKey, key } = newKey();
    node.fund(key.address, 10n * TRX);
    const p = await prepare(key, { to: newKey().key.address, value: '1' });
    const s = await signed(privateKey, key, p);
    const hex = privateKey.toString('hex');
    expect(JSON.stringify(p, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v))).not.toContain(
      hex,
    );
    expect(s.signedTx.toLowerCase()).not.toContain(hex);
    const tx = JSON.parse(s.signedTx);
    tx.signature = ['00'.repeat(65)];
    const err = await refusal(ops.broadcast(ep, { ...s, signedTx: JSON.stringify(tx) }));
    expect(String((err as Error).message).toLowerCase()).not.toContain(hex);
  });
});
