import { type Payment, Wallet, decode, encode, hashes } from 'xrpl';
import { LSF_REQUIRE_DEST_TAG, XrpResponder } from './xrp.js';

/** One rippled JSON-RPC call, as any client sends it. */
async function rpc(r: XrpResponder, method: string, params: Record<string, unknown> = {}) {
  const res = await fetch(r.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ method, params: [params] }),
  });
  expect(res.status).toBe(200);
  return ((await res.json()) as { result: Record<string, unknown> }).result;
}

const alice = Wallet.generate(); // ed25519 (xrpl's default)
const bob = Wallet.generate();
const carol = Wallet.generate();

function payment(from: Wallet, o: Partial<Payment> & { Sequence: number }): Payment {
  return {
    TransactionType: 'Payment',
    Account: from.classicAddress,
    Destination: bob.classicAddress,
    Amount: '1000000',
    Fee: '12',
    ...o,
  } as Payment;
}

describe('XrpResponder (rippled JSON-RPC)', () => {
  let r: XrpResponder;
  beforeEach(async () => {
    r = await XrpResponder.start({ reserveBase: 1_000_000n, reserveInc: 200_000n, networkId: 1 });
    r.fund(alice.classicAddress, 50_000_000n);
    r.fund(bob.classicAddress, 20_000_000n);
  });
  afterEach(() => r.close());

  it('answers account_info, fee, ledger_current, ledger and server_info as rippled does', async () => {
    const info = await rpc(r, 'account_info', { account: alice.classicAddress, ledger_index: 'current' });
    expect(info.status).toBe('success');
    const data = info.account_data as Record<string, unknown>;
    expect(data).toMatchObject({
      Account: alice.classicAddress,
      Balance: '50000000',
      LedgerEntryType: 'AccountRoot',
    });
    expect(data.Sequence).toBe(r.currentLedgerIndex);
    const missing = await rpc(r, 'account_info', { account: carol.classicAddress });
    expect(missing).toMatchObject({ status: 'error', error: 'actNotFound', error_code: 19 });
    expect(await rpc(r, 'account_info', { account: 'rNotAnAddress' })).toMatchObject({
      error: 'actMalformed',
    });
    const fee = await rpc(r, 'fee');
    expect(fee.drops).toMatchObject({ base_fee: '10', open_ledger_fee: '10' });
    expect((await rpc(r, 'ledger_current')).ledger_current_index).toBe(r.validatedLedgerIndex + 1);
    const ledger = await rpc(r, 'ledger', { ledger_index: 'validated' });
    expect(ledger).toMatchObject({
      ledger_index: r.validatedLedgerIndex,
      validated: true,
      status: 'success',
    });
    const server = (await rpc(r, 'server_info')).info as Record<string, unknown>;
    expect(server.validated_ledger).toMatchObject({
      reserve_base_xrp: 1,
      reserve_inc_xrp: 0.2,
      base_fee_xrp: 0.00001,
    });
    expect(server.network_id).toBe(1);
    expect(await rpc(r, 'no_such_method')).toMatchObject({ status: 'error', error: 'unknownCmd' });
  });

  it('applies a correctly signed payment, validates it at the ledger close and finds it by hash', async () => {
    const seq = r.account(alice.classicAddress)!.sequence;
    const { tx_blob: blob, hash } = alice.sign(
      payment(alice, { Sequence: seq, LastLedgerSequence: r.currentLedgerIndex + 5 }),
    );
    const sub = await rpc(r, 'submit', { tx_blob: blob });
    expect(sub).toMatchObject({
      status: 'success',
      engine_result: 'tesSUCCESS',
      engine_result_code: 0,
      applied: true,
    });
    expect((sub.tx_json as { hash: string }).hash).toBe(hash);
    expect(await rpc(r, 'tx', { transaction: hash })).toMatchObject({ validated: false, hash });
    expect(r.account(alice.classicAddress)).toMatchObject({
      balance: 50_000_000n - 1_000_012n,
      sequence: seq + 1,
    });
    expect(r.account(bob.classicAddress)!.balance).toBe(21_000_000n);
    const closed = r.closeLedger();
    const tx = await rpc(r, 'tx', { transaction: hash, binary: false });
    expect(tx).toMatchObject({
      validated: true,
      ledger_index: closed,
      Fee: '12',
      Amount: '1000000',
      meta: { TransactionResult: 'tesSUCCESS', delivered_amount: '1000000' },
    });
    expect(r.transaction(hash)?.tx).toEqual(decode(blob));
    const validated = await rpc(r, 'account_info', {
      account: alice.classicAddress,
      ledger_index: 'validated',
    });
    expect((validated.account_data as { Balance: string }).Balance).toBe(String(50_000_000n - 1_000_012n));
  });

  it('refuses a bad signature (invalidTransaction) and records nothing', async () => {
    const seq = r.account(alice.classicAddress)!.sequence;
    const { tx_blob: blob } = alice.sign(payment(alice, { Sequence: seq }));
    const tx = decode(blob) as Record<string, unknown>;
    // Same signature over a different amount: the signature no longer matches.
    const forged = encode({ ...tx, Amount: '2000000' } as never);
    const sub = await rpc(r, 'submit', { tx_blob: forged });
    expect(sub).toMatchObject({ status: 'error', error: 'invalidTransaction' });
    expect(String(sub.error_exception)).toContain('Invalid signature');
    expect(r.transactions).toHaveLength(0);
    expect(r.account(alice.classicAddress)!.balance).toBe(50_000_000n);
  });

  it('refuses a transaction signed by a key that is not the account’s (tefBAD_AUTH)', async () => {
    const seq = r.account(alice.classicAddress)!.sequence;
    // carol signs a payment from alice's account: a valid signature, the wrong key.
    const { tx_blob: blob } = carol.sign(payment(carol, { Account: alice.classicAddress, Sequence: seq }));
    expect((await rpc(r, 'submit', { tx_blob: blob })).engine_result).toBe('tefBAD_AUTH');
    expect(r.transactions).toHaveLength(0);
  });

  it('refuses a double spend of a Sequence (tefPAST_SEQ) and a future one (terPRE_SEQ)', async () => {
    const seq = r.account(alice.classicAddress)!.sequence;
    const first = alice.sign(payment(alice, { Sequence: seq }));
    const second = alice.sign(payment(alice, { Sequence: seq, Amount: '2000000' }));
    expect((await rpc(r, 'submit', { tx_blob: first.tx_blob })).engine_result).toBe('tesSUCCESS');
    expect((await rpc(r, 'submit', { tx_blob: second.tx_blob })).engine_result).toBe('tefPAST_SEQ');
    expect((await rpc(r, 'submit', { tx_blob: first.tx_blob })).engine_result).toBe('tefPAST_SEQ');
    const future = alice.sign(payment(alice, { Sequence: seq + 5 }));
    expect((await rpc(r, 'submit', { tx_blob: future.tx_blob })).engine_result).toBe('terPRE_SEQ');
    expect(r.transactions.map((t) => t.hash)).toEqual([first.hash]);
  });

  it('refuses a passed LastLedgerSequence (tefMAX_LEDGER) and a fee below the base fee (telINSUF_FEE_P)', async () => {
    const seq = r.account(alice.classicAddress)!.sequence;
    r.closeLedger();
    const late = alice.sign(payment(alice, { Sequence: seq, LastLedgerSequence: r.validatedLedgerIndex }));
    expect((await rpc(r, 'submit', { tx_blob: late.tx_blob })).engine_result).toBe('tefMAX_LEDGER');
    const cheap = alice.sign(payment(alice, { Sequence: seq, Fee: '9' }));
    expect((await rpc(r, 'submit', { tx_blob: cheap.tx_blob })).engine_result).toBe('telINSUF_FEE_P');
    expect(r.transactions).toHaveLength(0);
  });

  it('claims the fee of an unfunded payment (tecUNFUNDED_PAYMENT) and of one too small to create its destination (tecNO_DST_INSUF_XRP)', async () => {
    const seq = r.account(alice.classicAddress)!.sequence;
    // 50 XRP held, 1 XRP reserve: 49.5 XRP is more than can be sent.
    const big = alice.sign(payment(alice, { Sequence: seq, Amount: '49500000' }));
    expect((await rpc(r, 'submit', { tx_blob: big.tx_blob })).engine_result).toBe('tecUNFUNDED_PAYMENT');
    const small = alice.sign(
      payment(alice, { Sequence: seq + 1, Destination: carol.classicAddress, Amount: '999999' }),
    );
    expect((await rpc(r, 'submit', { tx_blob: small.tx_blob })).engine_result).toBe('tecNO_DST_INSUF_XRP');
    expect(r.account(alice.classicAddress)).toMatchObject({ balance: 50_000_000n - 24n, sequence: seq + 2 });
    expect(r.account(carol.classicAddress)).toBeUndefined();
    r.closeLedger();
    expect(await rpc(r, 'tx', { transaction: big.hash })).toMatchObject({
      validated: true,
      meta: { TransactionResult: 'tecUNFUNDED_PAYMENT' },
    });
    // Enough to create it: carol's account exists after.
    const create = alice.sign(
      payment(alice, { Sequence: seq + 2, Destination: carol.classicAddress, Amount: '1000000' }),
    );
    expect((await rpc(r, 'submit', { tx_blob: create.tx_blob })).engine_result).toBe('tesSUCCESS');
    expect(r.account(carol.classicAddress)!.balance).toBe(1_000_000n);
  });

  it('asks for a destination tag where the destination requires one (tecDST_TAG_NEEDED)', async () => {
    r.setAccount(bob.classicAddress, { flags: LSF_REQUIRE_DEST_TAG });
    const seq = r.account(alice.classicAddress)!.sequence;
    const untagged = alice.sign(payment(alice, { Sequence: seq }));
    expect((await rpc(r, 'submit', { tx_blob: untagged.tx_blob })).engine_result).toBe('tecDST_TAG_NEEDED');
    const tagged = alice.sign(payment(alice, { Sequence: seq + 1, DestinationTag: 7 }));
    expect((await rpc(r, 'submit', { tx_blob: tagged.tx_blob })).engine_result).toBe('tesSUCCESS');
  });

  it('queues a payment below the open-ledger fee (terQUEUED) and applies it at the close', async () => {
    r.openLedgerFee = 5000n;
    const seq = r.account(alice.classicAddress)!.sequence;
    const p = alice.sign(payment(alice, { Sequence: seq }));
    expect(await rpc(r, 'submit', { tx_blob: p.tx_blob })).toMatchObject({
      engine_result: 'terQUEUED',
      queued: true,
    });
    expect(r.account(alice.classicAddress)!.sequence).toBe(seq);
    const closed = r.closeLedger();
    expect(await rpc(r, 'tx', { transaction: p.hash })).toMatchObject({
      validated: true,
      ledger_index: closed,
      meta: { TransactionResult: 'tesSUCCESS' },
    });
  });

  it('enforces the NetworkID rule (none at or below 1024, the right one above)', async () => {
    const seq = r.account(alice.classicAddress)!.sequence;
    const withId = alice.sign(payment(alice, { Sequence: seq, NetworkID: 1 }));
    expect((await rpc(r, 'submit', { tx_blob: withId.tx_blob })).engine_result).toBe(
      'telNETWORK_ID_MAKES_TX_NON_CANONICAL',
    );
    const side = await XrpResponder.start({ networkId: 21337 });
    try {
      side.fund(alice.classicAddress, 50_000_000n);
      const s = side.account(alice.classicAddress)!.sequence;
      const none = alice.sign(payment(alice, { Sequence: s }));
      expect((await rpc(side, 'submit', { tx_blob: none.tx_blob })).engine_result).toBe(
        'telREQUIRES_NETWORK_ID',
      );
      const wrong = alice.sign(payment(alice, { Sequence: s, NetworkID: 21338 }));
      expect((await rpc(side, 'submit', { tx_blob: wrong.tx_blob })).engine_result).toBe('telWRONG_NETWORK');
      const right = alice.sign(payment(alice, { Sequence: s, NetworkID: 21337 }));
      expect((await rpc(side, 'submit', { tx_blob: right.tx_blob })).engine_result).toBe('tesSUCCESS');
    } finally {
      await side.close();
    }
  });

  it('answers txnNotFound with searched_all for a ledger range, and a malformed blob with invalidTransaction', async () => {
    const hash = hashes.hashSignedTx(alice.sign(payment(alice, { Sequence: 1 })).tx_blob);
    const v = r.validatedLedgerIndex;
    expect(await rpc(r, 'tx', { transaction: hash, min_ledger: v - 0, max_ledger: v })).toMatchObject({
      error: 'txnNotFound',
      searched_all: true,
    });
    expect(await rpc(r, 'tx', { transaction: hash, min_ledger: v, max_ledger: v + 5 })).toMatchObject({
      error: 'txnNotFound',
      searched_all: false,
    });
    expect(await rpc(r, 'submit', { tx_blob: '1200002280' })).toMatchObject({ error: 'invalidTransaction' });
  });

  it('keeps a dropped transaction in its cache (tx: validated false, never applied); forget: txnNotFound', async () => {
    const seq = r.account(alice.classicAddress)!.sequence;
    const lls = r.currentLedgerIndex + 2;
    const a = alice.sign(payment(alice, { Sequence: seq, LastLedgerSequence: lls }));
    expect(await rpc(r, 'submit', { tx_blob: a.tx_blob })).toMatchObject({ engine_result: 'tesSUCCESS' });
    r.drop(a.hash);
    while (r.validatedLedgerIndex < lls) r.closeLedger();
    const found = await rpc(r, 'tx', { transaction: a.hash, min_ledger: lls - 2, max_ledger: lls });
    expect(found).toMatchObject({ status: 'success', validated: false, hash: a.hash });
    expect(found.meta).toBeUndefined();
    const info = await rpc(r, 'account_info', { account: alice.classicAddress, ledger_index: 'validated' });
    expect(info).toMatchObject({ validated: true, ledger_index: r.validatedLedgerIndex });
    expect((info.account_data as { Sequence: number }).Sequence).toBe(seq);
    expect((info.account_data as { Balance: string }).Balance).toBe('50000000');
    // Another transaction takes the Sequence; a forgotten one is not found at all.
    const b = alice.sign(payment(alice, { Sequence: seq, Amount: '2000000' }));
    expect(await rpc(r, 'submit', { tx_blob: b.tx_blob })).toMatchObject({ engine_result: 'tesSUCCESS' });
    r.drop(b.hash, { forget: true });
    expect(await rpc(r, 'tx', { transaction: b.hash })).toMatchObject({ error: 'txnNotFound' });
  });

  it('fails requests on demand (HTTP 503) and stalls', async () => {
    r.failNext(1, 503);
    const res = await fetch(r.url, { method: 'POST', body: JSON.stringify({ method: 'fee', params: [{}] }) });
    expect(res.status).toBe(503);
    expect((await rpc(r, 'fee')).status).toBe('success');
    r.stall();
    await expect(
      fetch(r.url, {
        method: 'POST',
        body: JSON.stringify({ method: 'fee', params: [{}] }),
        signal: AbortSignal.timeout(200),
      }),
    ).rejects.toThrow();
    r.stall(false);
    expect((await rpc(r, 'fee')).status).toBe('success');
  });
});
