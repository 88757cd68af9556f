import { XrpResponder, LSF_REQUIRE_DEST_TAG } from '@custos/chain-responders/xrp';
import { CustosError } from '@custos/service-kit';
import {
  type Payment,
  Wallet,
  classicAddressToXAddress,
  convertHexToString,
  decode,
  hashes,
  verifySignature,
} from 'xrpl';
import type { ChainRecord } from '../../chains/chain-types.js';
import {
  ChainRpcError,
  type ChainEndpoint,
  type PrepareContext,
  type PreparedTransfer,
  type TransferInput,
} from '../../keys/chain-adapter.js';
import { xrpAdapter } from './index.js';
import { LEDGER_WINDOW, MAX_FEE_DROPS, type XrpUnsigned } from './xrp-transfer.js';

const adapter = xrpAdapter!;
const ops = adapter.transfers!;

const TESTNET: ChainRecord = {
  id: 'xrp-testnet',
  name: 'xrp-testnet',
  displayName: 'XRP Ledger Testnet',
  chainId: 144n,
  family: 'xrp',
  rpcUrl: '',
  wsUrl: '',
  explorerUrl: '',
  nativeCurrency: 'XRP',
  nativeDecimals: 6,
  isTestnet: true,
  isEnabled: true,
  createdAt: new Date(),
  updatedAt: new Date(),
};

let node: XrpResponder;
let ep: ChainEndpoint;
let key: ReturnType<typeof adapter.generate>;
let ctx: PrepareContext;
const bob = Wallet.generate();
const carol = Wallet.generate();

beforeEach(async () => {
  node = await XrpResponder.start({ reserveBase: 1_000_000n, reserveInc: 200_000n, networkId: 1 });
  ep = { chain: TESTNET, url: node.url, timeoutMs: 1500 };
  key = adapter.generate();
  ctx = {
    endpoint: ep,
    key: { address: key.address, publicKey: key.publicKey },
    from: key.address,
    inputsInUse: () => Promise.resolve(new Set<string>()),
  };
  node.fund(key.address, 100_000_000n); // 100 XRP
  node.fund(bob.classicAddress, 20_000_000n);
});
afterEach(() => node.close());

function input(o: Partial<TransferInput> = {}): TransferInput {
  return { to: bob.classicAddress, value: '1000000', ...o };
}

/** parse → prepare → sign as signer's flow does, the Sequence allocated from the chain's. */
async function prepareAndSign(o: Partial<TransferInput> = {}, sequence?: bigint) {
  const parsed = ops.parse(input(o), TESTNET);
  const prepared = (await ops.prepare(ctx, parsed)) as PreparedTransfer<XrpUnsigned>;
  const signed = await ops.sign(key.privateKey, prepared, {
    chain: TESTNET,
    key: ctx.key,
    sequence: sequence ?? prepared.sequenceFromChain!,
  });
  return { prepared, signed };
}

/** The CustosError `fn` throws (fails the test when it throws something else or nothing). */
async function refusal(fn: () => unknown): Promise<CustosError> {
  try {
    await fn();
  } catch (err) {
    expect(err).toBeInstanceOf(CustosError);
    return err as CustosError;
  }
  throw new Error('expected a refusal');
}

async function rpcFailure(fn: () => Promise<unknown>): Promise<ChainRpcError> {
  try {
    await fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ChainRpcError);
    return err as ChainRpcError;
  }
  throw new Error('expected a ChainRpcError');
}

describe('xrp transfers against a local rippled', () => {
  it('prepares, signs, broadcasts and follows a payment to confirmed; the blob verifies with xrpl', async () => {
    const seq = node.account(key.address)!.sequence;
    const { prepared, signed } = await prepareAndSign({
      value: '2.5',
      memo: 'invoice 42 ✓',
      destinationTag: 12345,
    });
    expect(prepared.value).toBe(2_500_000n);
    expect(prepared.fee).toBe(10n);
    expect(prepared.to).toBe(bob.classicAddress);
    expect(prepared.sequenceFromChain).toBe(BigInt(seq));
    expect(prepared.expiry).toEqual({
      kind: 'ledger',
      value: BigInt(node.currentLedgerIndex + LEDGER_WINDOW),
    });
    expect(prepared.details).toMatchObject({ memo: 'invoice 42 ✓', destination_tag: 12345, fee_drops: '10' });

    // Independent check of the signed bytes with xrpl.
    expect(verifySignature(signed.signedTx, key.publicKey)).toBe(true);
    expect(signed.txHash).toBe(hashes.hashSignedTx(signed.signedTx));
    const tx = decode(signed.signedTx) as unknown as Payment;
    expect(tx).toMatchObject({
      TransactionType: 'Payment',
      Account: key.address,
      Destination: bob.classicAddress,
      Amount: '2500000',
      Fee: '10',
      Sequence: seq,
      DestinationTag: 12345,
      LastLedgerSequence: node.currentLedgerIndex + LEDGER_WINDOW,
      SigningPubKey: key.publicKey,
    });
    expect(tx.NetworkID).toBeUndefined();
    expect(convertHexToString(tx.Memos![0]!.Memo.MemoData!)).toBe('invoice 42 ✓');

    await ops.broadcast(ep, signed);
    const rec = node.transaction(signed.txHash);
    expect(rec).toMatchObject({ engineResult: 'tesSUCCESS', validated: false });
    expect(await ops.status(ep, { ...signed, expiry: prepared.expiry })).toEqual({ state: 'pending' });
    const ledger = node.closeLedger();
    expect(await ops.status(ep, { ...signed, expiry: prepared.expiry })).toEqual({
      state: 'confirmed',
      block: BigInt(ledger),
      fee: 10n,
    });
    expect(node.account(bob.classicAddress)!.balance).toBe(22_500_000n);
    expect(node.account(key.address)).toMatchObject({
      balance: 100_000_000n - 2_500_010n,
      sequence: seq + 1,
    });
  });

  it('signs with the Sequence signer allocated, not the chain’s', async () => {
    const seq = node.account(key.address)!.sequence;
    const { signed } = await prepareAndSign({}, BigInt(seq + 3));
    expect((decode(signed.signedTx) as { Sequence: number }).Sequence).toBe(seq + 3);
    // The node holds it back: an earlier Sequence is missing (terPRE_SEQ), neither refused nor known.
    const err = await rpcFailure(() => ops.broadcast(ep, signed));
    expect(err.message).toContain('terPRE_SEQ');
    expect(err.rejected).toBe(false);
    expect(err.alreadyKnown).toBe(false);
  });

  it('sign-only: the blob parses and verifies, nothing reaches the node', async () => {
    const { signed } = await prepareAndSign({ value: '3000000' });
    const tx = decode(signed.signedTx) as unknown as Payment;
    expect(tx.Amount).toBe('3000000');
    expect(verifySignature(signed.signedTx)).toBe(true);
    // Another key's public key does not verify it.
    expect(verifySignature(signed.signedTx, bob.publicKey)).toBe(false);
    expect(node.submissions).toHaveLength(0);
  });

  it('refuses to sign for an account the key is not', async () => {
    const parsed = ops.parse(input(), TESTNET);
    const prepared = await ops.prepare(ctx, parsed);
    const other = adapter.generate();
    expect(() =>
      ops.sign(other.privateKey, prepared, { chain: TESTNET, key: ctx.key, sequence: 1n }),
    ).toThrow('does not sign for the account');
    expect(() => ops.sign(key.privateKey, prepared, { chain: TESTNET, key: ctx.key })).toThrow('Sequence');
  });

  it('refuses what the balance cannot cover above the reserve (insufficient_funds, 400 value)', async () => {
    // 100 XRP held, 1 XRP reserve, 10 drops fee: 99 XRP - 10 drops is the most.
    const ok = await ops.prepare(ctx, ops.parse(input({ value: String(99_000_000 - 10) }), TESTNET));
    expect(ok.value).toBe(98_999_990n);
    const e = await refusal(() =>
      ops.prepare(ctx, ops.parse(input({ value: String(99_000_000 - 9) }), TESTNET)),
    );
    expect(e.kind).toBe('invalid_argument');
    expect(e.field).toBe('value');
    expect(e.type).toBe('insufficient_funds');
    expect(e.httpStatus).toBe(400);
    expect(node.submissions).toHaveLength(0);
  });

  it('counts the owner reserve of objects the account owns', async () => {
    node.setAccount(key.address, { ownerCount: 5 }); // 5 × 0.2 XRP more locked
    const e = await refusal(() => ops.prepare(ctx, ops.parse(input({ value: '98.5' }), TESTNET)));
    expect(e.type).toBe('insufficient_funds');
    expect((await ops.prepare(ctx, ops.parse(input({ value: '97.9' }), TESTNET))).value).toBe(97_900_000n);
  });

  it('refuses a key whose account does not exist yet (actNotFound → insufficient_funds)', async () => {
    const fresh = adapter.generate();
    const e = await refusal(() =>
      ops.prepare(
        { ...ctx, key: { address: fresh.address, publicKey: fresh.publicKey }, from: fresh.address },
        input(),
      ),
    );
    expect(e.type).toBe('insufficient_funds');
    expect(e.field).toBe('value');
    expect(e.detail).toContain('does not exist');
  });

  it('refuses to create a destination with less than the base reserve (400 value), creates it with enough', async () => {
    const e = await refusal(() =>
      ops.prepare(ctx, ops.parse(input({ to: carol.classicAddress, value: '0.999999' }), TESTNET)),
    );
    expect(e.field).toBe('value');
    expect(e.type).not.toBe('insufficient_funds');
    expect(e.detail).toContain('base reserve');
    const { prepared, signed } = await prepareAndSign({ to: carol.classicAddress, value: '1.0' });
    expect(prepared.details.destination_exists).toBe(false);
    await ops.broadcast(ep, signed);
    node.closeLedger();
    expect(await ops.status(ep, { ...signed, expiry: prepared.expiry })).toMatchObject({
      state: 'confirmed',
    });
    expect(node.account(carol.classicAddress)!.balance).toBe(1_000_000n);
  });

  it('asks for a destination tag when the destination requires one (400 destination_tag)', async () => {
    node.setAccount(bob.classicAddress, { flags: LSF_REQUIRE_DEST_TAG });
    const e = await refusal(() => ops.prepare(ctx, ops.parse(input(), TESTNET)));
    expect(e.field).toBe('destination_tag');
    const { signed } = await prepareAndSign({ destinationTag: 0 });
    expect((decode(signed.signedTx) as { DestinationTag: number }).DestinationTag).toBe(0);
  });

  it('refuses malformed and wrong-network addresses and fields the chain does not have, naming them', async () => {
    const field = async (o: Partial<TransferInput>) =>
      (await refusal(() => ops.parse(input(o), TESTNET))).field;
    expect(await field({ to: 'rLUEXYuLiQptky37CqLcm9USQpPiz5rkpE' })).toBe('to'); // bad checksum
    expect(await field({ to: '0x000000000000000000000000000000000000dEaD' })).toBe('to');
    expect(await field({ to: '' })).toBe('to');
    // A mainnet X-address on a test network.
    expect(await field({ to: classicAddressToXAddress(bob.classicAddress, false, false) })).toBe('to');
    expect(
      await field({ to: classicAddressToXAddress(bob.classicAddress, 5, true), destinationTag: 6 }),
    ).toBe('destination_tag');
    expect(await field({ destinationTag: -1 })).toBe('destination_tag');
    expect(await field({ destinationTag: 2 ** 32 })).toBe('destination_tag');
    expect(await field({ destinationTag: 1.5 })).toBe('destination_tag');
    expect(await field({ value: '0' })).toBe('value');
    expect(await field({ value: 'abc' })).toBe('value');
    expect(await field({ value: '1.0000001' })).toBe('value');
    expect(await field({ value: '100000000000.000001' })).toBe('value');
    expect(await field({ memo: 'x'.repeat(1020) })).toBe('memo');
    expect(await field({ data: '0xdeadbeef' })).toBe('data');
    expect(await field({ feeRateSatPerVbyte: 5 })).toBe('fee_rate_sat_per_vbyte');
    expect(await field({ feeLimitSun: 5 })).toBe('fee_limit_sun');
    expect(await field({ tokenMint: 'USD.rXYZ' })).toBe('token_mint');
    expect(await field({ ttl: 60 })).toBe('ttl');
    const self = await refusal(() => ops.prepare(ctx, input({ to: key.address })));
    expect(self.field).toBe('to');
    expect(node.submissions).toHaveLength(0);
  });

  it('takes an X-address of its network, its tag as the destination tag, and the largest memo rippled allows', () => {
    const p = ops.parse(input({ to: classicAddressToXAddress(bob.classicAddress, 77, true) }), TESTNET);
    expect(p).toMatchObject({ to: bob.classicAddress, destinationTag: 77 });
    expect(ops.parse(input({ memo: 'x'.repeat(1019) }), TESTNET).memo).toHaveLength(1019);
    expect(ops.parse(input({ data: '0x' }), TESTNET).to).toBe(bob.classicAddress);
  });

  it('pays the open-ledger fee up to the cap; above it, signs with the cap and the node queues it', async () => {
    node.openLedgerFee = 500n;
    expect((await ops.prepare(ctx, input())).fee).toBe(500n);
    node.openLedgerFee = 50_000n;
    const { prepared, signed } = await prepareAndSign();
    expect(prepared.fee).toBe(MAX_FEE_DROPS);
    expect(prepared.details.fee_capped).toBe(true);
    await ops.broadcast(ep, signed); // terQUEUED: accepted
    expect(node.submissions.at(-1)!.result).toBe('terQUEUED');
    // The same bytes again while queued: the node has them (tefALREADY).
    const again = await rpcFailure(() => ops.broadcast(ep, signed));
    expect(again.message).toContain('tefALREADY');
    expect(again.alreadyKnown).toBe(true);
    expect(await ops.status(ep, { ...signed, expiry: prepared.expiry })).toEqual({ state: 'pending' });
    node.closeLedger();
    expect(await ops.status(ep, { ...signed, expiry: prepared.expiry })).toMatchObject({
      state: 'confirmed',
      fee: MAX_FEE_DROPS,
    });
  });

  it('maps a resubmission of validated bytes to alreadyKnown, another use of the Sequence to rejected', async () => {
    const seq = BigInt(node.account(key.address)!.sequence);
    const first = await prepareAndSign({}, seq);
    const second = await prepareAndSign({ value: '2000000' }, seq);
    await ops.broadcast(ep, first.signed);
    node.closeLedger();
    const again = await rpcFailure(() => ops.broadcast(ep, first.signed));
    expect(again.message).toContain('tefPAST_SEQ');
    expect(again.alreadyKnown).toBe(true);
    expect(again.rejected).toBe(false);
    const other = await rpcFailure(() => ops.broadcast(ep, second.signed));
    expect(other.message).toContain('tefPAST_SEQ');
    expect(other.rejected).toBe(true);
    expect(other.alreadyKnown).toBe(false);
  });

  it('maps a passed LastLedgerSequence (tefMAX_LEDGER) and a bad signature (invalidTransaction) to rejected', async () => {
    const { signed, prepared } = await prepareAndSign();
    for (let i = 0; i <= LEDGER_WINDOW; i++) node.closeLedger();
    const late = await rpcFailure(() => ops.broadcast(ep, signed));
    expect(late.message).toContain('tefMAX_LEDGER');
    expect(late.rejected).toBe(true);
    expect(await ops.status(ep, { ...signed, expiry: prepared.expiry })).toMatchObject({ state: 'expired' });

    const fresh = await prepareAndSign();
    const tampered = decode(fresh.signed.signedTx) as Record<string, unknown>;
    const { encode } = await import('xrpl');
    const forged = encode({ ...tampered, Amount: '1000001' } as never);
    const bad = await rpcFailure(() =>
      ops.broadcast(ep, { signedTx: forged, txHash: hashes.hashSignedTx(forged) }),
    );
    expect(bad.message).toContain('invalidTransaction');
    expect(bad.rejected).toBe(true);
    expect(node.transactions).toHaveLength(0);
  });

  it('accepts a tec result at submit (fee claimed) and reports the transfer failed once validated', async () => {
    const { signed, prepared } = await prepareAndSign({ value: '90.0' });
    // Spend most of the balance first with the same key (xrpl directly), Sequence before ours.
    const w = new Wallet(key.publicKey, `ED${key.privateKey.toString('hex').toUpperCase()}`);
    const seq = Number(prepared.sequenceFromChain);
    const drain = w.sign({
      TransactionType: 'Payment',
      Account: key.address,
      Destination: bob.classicAddress,
      Amount: '50000000',
      Fee: '10',
      Sequence: seq,
    });
    const later = await ops.sign(key.privateKey, prepared, {
      chain: TESTNET,
      key: ctx.key,
      sequence: BigInt(seq + 1),
    });
    expect(signed.txHash).not.toBe(later.txHash);
    await ops.broadcast(ep, { signedTx: drain.tx_blob, txHash: drain.hash });
    await ops.broadcast(ep, later);
    expect(node.transaction(later.txHash)!.engineResult).toBe('tecUNFUNDED_PAYMENT');
    const ledger = node.closeLedger();
    expect(await ops.status(ep, { ...later, expiry: prepared.expiry })).toEqual({
      state: 'failed',
      reason: 'tecUNFUNDED_PAYMENT',
      block: BigInt(ledger),
      fee: 10n,
    });
  });

  it('reports unknown while a dropped transaction can still be included, expired after its LastLedgerSequence', async () => {
    const { signed, prepared } = await prepareAndSign();
    await ops.broadcast(ep, signed);
    // A node that lost it entirely (restarted, another server behind the URL): txnNotFound.
    node.drop(signed.txHash, { forget: true });
    expect(await ops.status(ep, { ...signed, expiry: prepared.expiry })).toEqual({ state: 'unknown' });
    expect(await ops.status(ep, { txHash: signed.txHash, signedTx: signed.signedTx })).toEqual({
      state: 'unknown',
    });
    // Sending the same bytes again (what signer does on unknown) gets it in.
    await ops.broadcast(ep, signed);
    node.closeLedger();
    expect(await ops.status(ep, { ...signed, expiry: prepared.expiry })).toMatchObject({
      state: 'confirmed',
    });

    // Dropped but still in the node's cache (tx: validated false): pending until its
    // LastLedgerSequence is validated, then expired — the validated Sequence is still ours.
    const next = await prepareAndSign();
    await ops.broadcast(ep, next.signed);
    node.drop(next.signed.txHash);
    node.closeLedger();
    expect(await ops.status(ep, { ...next.signed, expiry: next.prepared.expiry })).toEqual({
      state: 'pending',
    });
    for (let i = 0; i < LEDGER_WINDOW; i++) node.closeLedger();
    expect(node.validatedLedgerIndex).toBeGreaterThanOrEqual(Number(next.prepared.expiry!.value));
    const s = await ops.status(ep, { ...next.signed, expiry: next.prepared.expiry });
    expect(s.state).toBe('expired');
  });

  it('a payment whose Sequence another transaction took is failed (not expired, not pending forever)', async () => {
    const { signed, prepared } = await prepareAndSign();
    await ops.broadcast(ep, signed);
    node.drop(signed.txHash);
    // Another transaction of the same key takes the Sequence (xrpl directly) and is validated.
    const w = new Wallet(key.publicKey, `ED${key.privateKey.toString('hex').toUpperCase()}`);
    const other = w.sign({
      TransactionType: 'Payment',
      Account: key.address,
      Destination: carol.classicAddress,
      Amount: '3000000',
      Fee: '10',
      Sequence: Number(prepared.sequenceFromChain),
    });
    await ops.broadcast(ep, { signedTx: other.tx_blob, txHash: other.hash });
    node.closeLedger();
    expect(await ops.status(ep, { ...signed, expiry: prepared.expiry })).toEqual({ state: 'pending' });
    while (node.validatedLedgerIndex < Number(prepared.expiry!.value)) node.closeLedger();
    const st = await ops.status(ep, { ...signed, expiry: prepared.expiry });
    expect(st).toMatchObject({
      state: 'failed',
      reason: expect.stringContaining('consumed by another transaction'),
    });
    // The other one is confirmed.
    expect((await ops.status(ep, { signedTx: other.tx_blob, txHash: other.hash })).state).toBe('confirmed');
  });

  it('stays pending, never failed, when another transaction has its Sequence but the node lacks ledgers of its window (searched_all false)', async () => {
    const { signed, prepared } = await prepareAndSign();
    await ops.broadcast(ep, signed);
    node.drop(signed.txHash, { forget: true });
    const w = new Wallet(key.publicKey, `ED${key.privateKey.toString('hex').toUpperCase()}`);
    const other = w.sign({
      TransactionType: 'Payment',
      Account: key.address,
      Destination: carol.classicAddress,
      Amount: '3000000',
      Fee: '10',
      Sequence: Number(prepared.sequenceFromChain),
    });
    await ops.broadcast(ep, { signedTx: other.tx_blob, txHash: other.hash });
    node.closeLedger();
    // A window that starts before the node's first ledger (1000): it cannot say ours is in none.
    const lls = node.validatedLedgerIndex;
    expect(lls - LEDGER_WINDOW).toBeLessThan(1000);
    expect(await ops.status(ep, { ...signed, expiry: { kind: 'ledger', value: BigInt(lls) } })).toEqual({
      state: 'pending',
    });
  });

  it('says what the key can spend: the balance above the reserve (available)', async () => {
    node.setAccount(key.address, { ownerCount: 2 });
    const { prepared } = await prepareAndSign();
    // 100 XRP − (1 XRP base + 2 × 0.2 XRP owner reserve).
    expect(prepared.available).toEqual({ native: 100_000_000n - 1_400_000n });
  });

  it('concludes expired from the validated Sequence even when the node lacks ledgers of the window (searched_all false)', async () => {
    const { signed } = await prepareAndSign();
    // A node whose history starts at ledger 1000 (the responder's first) asked about a transaction
    // whose window began before it: it cannot search every ledger, but the account's Sequence in
    // the validated ledger is still ours, so the payment was never applied and never can be.
    const lls = node.validatedLedgerIndex + 5;
    while (node.validatedLedgerIndex < lls) node.closeLedger();
    expect(lls - LEDGER_WINDOW).toBeLessThan(1000);
    expect(await ops.status(ep, { ...signed, expiry: { kind: 'ledger', value: BigInt(lls) } })).toMatchObject(
      {
        state: 'expired',
      },
    );
    expect(node.calls.some((c) => c.method === 'account_info' && c.params.ledger_index === 'validated')).toBe(
      true,
    );
    const asked = node.calls.filter((c) => c.method === 'tx').at(-1)!.params;
    expect(asked).toMatchObject({
      transaction: signed.txHash,
      min_ledger: lls - LEDGER_WINDOW,
      max_ledger: lls,
    });
  });

  it('carries the NetworkID a network above 1024 requires, which the node checks', async () => {
    const side = await XrpResponder.start({ networkId: 21337 });
    try {
      side.fund(key.address, 50_000_000n);
      const sep = { ...ep, url: side.url };
      const prepared = await ops.prepare({ ...ctx, endpoint: sep }, ops.parse(input(), TESTNET));
      const signed = await ops.sign(key.privateKey, prepared, {
        chain: TESTNET,
        key: ctx.key,
        sequence: prepared.sequenceFromChain!,
      });
      expect((decode(signed.signedTx) as { NetworkID?: number }).NetworkID).toBe(21337);
      await ops.broadcast(sep, signed);
      expect(side.transaction(signed.txHash)!.engineResult).toBe('tesSUCCESS');
    } finally {
      await side.close();
    }
  });

  it('maps node failures: 503 and a silent node (timeout) are not rejections', async () => {
    const { signed } = await prepareAndSign();
    node.failNext(1, 503);
    const e503 = await rpcFailure(() => ops.broadcast(ep, signed));
    expect(e503.rejected).toBe(false);
    expect(e503.alreadyKnown).toBe(false);
    expect(node.transactions).toHaveLength(0);

    node.failNext(1, 503);
    const prep = await rpcFailure(() => ops.prepare(ctx, input()));
    expect(prep.rejected).toBe(false);

    node.stall();
    const started = Date.now();
    const slow = await rpcFailure(() => ops.broadcast(ep, signed));
    expect(slow.message).toContain('timed out');
    expect(slow.rejected).toBe(false);
    expect(Date.now() - started).toBeLessThan(5000);
    const st = await rpcFailure(() => ops.status(ep, signed));
    expect(st.rejected).toBe(false);
    node.stall(false);
    // The stalled submit the client gave up on may still be served first (as a real server may):
    // the bytes are then already known.
    try {
      await ops.broadcast(ep, signed);
    } catch (err) {
      expect(err).toBeInstanceOf(ChainRpcError);
      expect((err as ChainRpcError).alreadyKnown).toBe(true);
    }
    expect(node.transaction(signed.txHash)!.engineResult).toBe('tesSUCCESS');
  });

  it('never puts the private key in what it returns or throws', async () => {
    const hex = key.privateKey.toString('hex');
    const { prepared, signed } = await prepareAndSign();
    const seen = JSON.stringify({ prepared, signed }, (_k, v: unknown) =>
      typeof v === 'bigint' ? v.toString() : v,
    );
    expect(seen.toLowerCase()).not.toContain(hex);
    node.failNext(1, 500, 'boom');
    const e = await rpcFailure(() => ops.broadcast(ep, signed));
    expect(e.message.toLowerCase()).not.toContain(hex);
  });
});
