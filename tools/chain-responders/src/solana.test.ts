import {
  ACCOUNT_SIZE,
  MINT_SIZE,
  createAssociatedTokenAccountIdempotentInstruction,
  createTransferCheckedInstruction,
  getAccount,
  getAssociatedTokenAddressSync,
  getMint,
  // @ts-expect-error TS1479: the package is ESM-typed but ships CommonJS (its `require` condition), which runs
} from '@solana/spl-token';
import {
  Connection,
  Keypair,
  PublicKey,
  SendTransactionError,
  SystemProgram,
  Transaction,
  TransactionInstruction,
} from '@solana/web3.js';
import {
  BLOCKHASH_VALID_BLOCKS,
  LAMPORTS_PER_SIGNATURE,
  MEMO_PROGRAM_ID,
  type SolanaResponder,
  rentExemptMinimum,
  startSolanaResponder,
} from './solana.js';

const SOL = 1_000_000_000n;
let r: SolanaResponder;
let conn: Connection;

beforeAll(async () => {
  r = await startSolanaResponder();
  conn = new Connection(r.url, 'confirmed');
});
afterAll(async () => {
  await r.close();
});

function funded(lamports = SOL): Keypair {
  const k = Keypair.generate();
  r.fund(k.publicKey.toBase58(), lamports);
  return k;
}

async function transferTx(
  from: Keypair,
  to: PublicKey,
  lamports: bigint,
  blockhash?: string,
): Promise<Transaction> {
  const bh = blockhash ?? (await conn.getLatestBlockhash()).blockhash;
  const tx = new Transaction({ feePayer: from.publicKey, recentBlockhash: bh }).add(
    SystemProgram.transfer({ fromPubkey: from.publicKey, toPubkey: to, lamports }),
  );
  tx.sign(from);
  return tx;
}

/** The raw JSON-RPC answer to one call. */
async function rpc(
  method: string,
  params: unknown[],
): Promise<{ result?: unknown; error?: { code: number; message: string; data?: { err?: unknown } } }> {
  const res = await fetch(r.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 7, method, params }),
  });
  expect(res.status).toBe(200);
  const body = (await res.json()) as { id: number };
  expect(body.id).toBe(7);
  return body as never;
}

const send = (tx: Transaction) =>
  rpc('sendTransaction', [
    tx.serialize({ requireAllSignatures: false, verifySignatures: false }).toString('base64'),
    { encoding: 'base64' },
  ]);

describe('solana responder', () => {
  it('answers web3.js Connection calls: balance, account, blockhash, rent, fee, height', async () => {
    const k = funded(5n * SOL);
    expect(await conn.getBalance(k.publicKey)).toBe(5 * 1e9);
    const info = await conn.getAccountInfo(k.publicKey);
    expect(info?.owner.equals(SystemProgram.programId)).toBe(true);
    expect(await conn.getAccountInfo(Keypair.generate().publicKey)).toBeNull();
    const bh = await conn.getLatestBlockhash();
    expect(bh).toEqual(r.latestBlockhash());
    expect(bh.lastValidBlockHeight).toBe(r.blockHeight + BLOCKHASH_VALID_BLOCKS);
    expect(await conn.getMinimumBalanceForRentExemption(0)).toBe(890_880);
    expect(await conn.getMinimumBalanceForRentExemption(165)).toBe(2_039_280);
    const tx = await transferTx(k, Keypair.generate().publicKey, 1n);
    expect((await conn.getFeeForMessage(tx.compileMessage())).value).toBe(5000);
    const h = await conn.getBlockHeight('confirmed');
    r.advance(3);
    expect(await conn.getBlockHeight('confirmed')).toBe(h + 3);
    expect(await conn.getBlockHeight('finalized')).toBe(Math.max(0, h + 3 - 32));
    expect(await conn.getSlot('confirmed')).toBe(r.slot);
  });

  it('keeps SPL mints and token accounts in the real layouts (spl-token reads them through the RPC)', async () => {
    const owner = Keypair.generate().publicKey;
    const mint = r.createMint(7);
    const ata = r.mintTo(mint, owner.toBase58(), 1234n);
    const m = await getMint(conn, new PublicKey(mint));
    expect(m.decimals).toBe(7);
    expect(m.supply).toBe(1234n);
    const a = await getAccount(conn, new PublicKey(ata));
    expect(a.amount).toBe(1234n);
    expect(a.owner.equals(owner)).toBe(true);
    expect(ata).toBe(getAssociatedTokenAddressSync(new PublicKey(mint), owner).toBase58());
    expect((await conn.getAccountInfo(new PublicKey(mint)))?.data.length).toBe(MINT_SIZE);
    expect((await conn.getAccountInfo(new PublicKey(ata)))?.lamports).toBe(
      Number(rentExemptMinimum(ACCOUNT_SIZE)),
    );
  });

  it('verifies, executes and records a SOL transfer; statuses go processed → confirmed → finalized', async () => {
    const k = funded();
    const to = Keypair.generate().publicKey;
    const sig = await conn.sendRawTransaction((await transferTx(k, to, SOL / 2n)).serialize());
    expect(r.balance(to.toBase58())).toBe(SOL / 2n);
    expect(r.balance(k.publicKey.toBase58())).toBe(SOL / 2n - LAMPORTS_PER_SIGNATURE);
    const rec = r.transactions.at(-1)!;
    expect(rec.signature).toBe(sig);
    expect(rec.solTransfers).toEqual([
      { from: k.publicKey.toBase58(), to: to.toBase58(), lamports: SOL / 2n },
    ]);
    const st = async () => (await conn.getSignatureStatuses([sig])).value[0];
    expect(await st()).toMatchObject({ confirmationStatus: 'processed', confirmations: 0, err: null });
    r.advance(1);
    expect(await st()).toMatchObject({ confirmationStatus: 'confirmed', confirmations: 1 });
    r.advance(31);
    expect(await st()).toMatchObject({
      confirmationStatus: 'finalized',
      confirmations: null,
      slot: rec.slot,
    });
    expect(
      (await conn.getSignatureStatuses([Keypair.generate().publicKey.toBase58() + 'x'])).value[0],
    ).toBeNull();
  });

  it('refuses a bad signature, an unsigned transaction and garbage', async () => {
    const k = funded();
    const tx = await transferTx(k, Keypair.generate().publicKey, 1000n);
    const raw = tx.serialize();
    raw[5] ^= 1;
    let a = await rpc('sendTransaction', [raw.toString('base64'), { encoding: 'base64' }]);
    expect(a.error).toMatchObject({ code: -32003, message: 'Transaction signature verification failure' });
    // Signed by another key than the fee payer's.
    const other = Keypair.generate();
    const forged = new Transaction({ feePayer: k.publicKey, recentBlockhash: tx.recentBlockhash! }).add(
      SystemProgram.transfer({ fromPubkey: k.publicKey, toPubkey: other.publicKey, lamports: 1000n }),
    );
    forged.addSignature(k.publicKey, Buffer.from(Keypair.generate().secretKey.slice(0, 64)));
    a = await send(forged);
    expect(a.error?.code).toBe(-32003);
    const unsigned = new Transaction({ feePayer: k.publicKey, recentBlockhash: tx.recentBlockhash! }).add(
      SystemProgram.transfer({ fromPubkey: k.publicKey, toPubkey: other.publicKey, lamports: 1000n }),
    );
    a = await send(unsigned);
    expect(a.error?.code).toBe(-32003);
    a = await rpc('sendTransaction', ['AAAA', { encoding: 'base64' }]);
    expect(a.error?.code).toBe(-32602);
    expect(r.balance(other.publicKey.toBase58())).toBe(0n);
  });

  it('refuses a double spend: the same transaction twice, and two spending one balance', async () => {
    const k = funded();
    const tx = await transferTx(k, Keypair.generate().publicKey, SOL / 2n);
    const first = await send(tx);
    expect(first.result).toBe(r.transactions.at(-1)!.signature);
    expect(r.transactions.at(-1)!.wire).toBe(tx.serialize().toString('base64'));
    const again = await send(tx);
    expect(again.error).toMatchObject({
      code: -32002,
      message: 'Transaction simulation failed: This transaction has already been processed',
    });
    expect(again.error?.data?.err).toBe('AlreadyProcessed');
    const second = await transferTx(k, Keypair.generate().publicKey, SOL / 2n);
    const a = await send(second);
    expect(a.error?.code).toBe(-32002);
    expect(a.error?.message).toBe(
      'Transaction simulation failed: Error processing Instruction 0: custom program error: 0x1',
    );
    expect(a.error?.data?.err).toEqual({ InstructionError: [0, { Custom: 1 }] });
    expect(r.balance(k.publicKey.toBase58())).toBe(SOL / 2n - 5000n);
    // web3.js reads the same answer as a SendTransactionError with the logs.
    const e = await conn.sendRawTransaction(second.serialize()).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(SendTransactionError);
    expect((e as SendTransactionError).logs?.join('\n')).toMatch(/insufficient lamports/);
  });

  it('refuses an unknown or expired blockhash', async () => {
    const k = funded();
    const unknown = await transferTx(
      k,
      Keypair.generate().publicKey,
      SOL / 10n,
      Keypair.generate().publicKey.toBase58(),
    );
    let a = await send(unknown);
    expect(a.error).toMatchObject({
      code: -32002,
      message: 'Transaction simulation failed: Blockhash not found',
    });
    expect(a.error?.data?.err).toBe('BlockhashNotFound');
    const old = await transferTx(k, Keypair.generate().publicKey, SOL / 10n);
    r.advance(BLOCKHASH_VALID_BLOCKS);
    expect((await send(old)).result).toEqual(expect.any(String)); // still valid at its last valid height
    const older = await transferTx(k, Keypair.generate().publicKey, SOL / 10n, old.recentBlockhash);
    r.advance(1);
    a = await send(older);
    expect(a.error?.data?.err).toBe('BlockhashNotFound');
  });

  it('refuses an unfunded fee payer, a fee it cannot pay, and a new account below rent', async () => {
    const ghost = Keypair.generate();
    let a = await send(await transferTx(ghost, Keypair.generate().publicKey, 1n));
    expect(a.error?.data?.err).toBe('AccountNotFound');
    const poor = funded(4999n);
    a = await send(await transferTx(poor, Keypair.generate().publicKey, 1n));
    expect(a.error?.data?.err).toBe('InsufficientFundsForFee');
    const k = funded();
    a = await send(await transferTx(k, Keypair.generate().publicKey, 890_879n));
    expect(a.error?.data?.err).toEqual({ InsufficientFundsForRent: { account_index: 1 } });
    // Leaving the payer itself below rent.
    a = await send(await transferTx(k, Keypair.generate().publicKey, SOL - 5000n - 1n));
    expect(a.error?.data?.err).toEqual({ InsufficientFundsForRent: { account_index: 0 } });
    expect(r.balance(k.publicKey.toBase58())).toBe(SOL);
  });

  it('creates associated token accounts and checks TransferChecked: decimals, owner, balance, frozen', async () => {
    const k = funded();
    const mint = new PublicKey(r.createMint(6));
    const srcAta = new PublicKey(r.mintTo(mint.toBase58(), k.publicKey.toBase58(), 1_000_000n));
    const to = Keypair.generate().publicKey;
    const dst = getAssociatedTokenAddressSync(mint, to);
    const bh = (await conn.getLatestBlockhash()).blockhash;
    const tokenTx = (amount: bigint, decimals: number, signer = k, memo?: Buffer) => {
      const tx = new Transaction({ feePayer: signer.publicKey, recentBlockhash: bh }).add(
        createAssociatedTokenAccountIdempotentInstruction(signer.publicKey, dst, to, mint),
        createTransferCheckedInstruction(srcAta, mint, dst, signer.publicKey, amount, decimals),
      );
      if (memo) {
        tx.add(
          new TransactionInstruction({
            programId: MEMO_PROGRAM_ID,
            keys: [{ pubkey: signer.publicKey, isSigner: true, isWritable: false }],
            data: memo,
          }),
        );
      }
      tx.sign(signer);
      return tx;
    };
    let a = await send(tokenTx(10n, 9));
    expect(a.error?.data?.err).toEqual({ InstructionError: [1, { Custom: 0x12 }] });
    a = await send(tokenTx(10n, 6, funded()));
    expect(a.error?.data?.err).toEqual({ InstructionError: [1, { Custom: 0x4 }] });
    a = await send(tokenTx(1_000_001n, 6));
    expect(a.error?.data?.err).toEqual({ InstructionError: [1, { Custom: 0x1 }] });
    a = await send(tokenTx(10n, 6, k, Buffer.from([0xff, 0xfe])));
    expect(a.error?.data?.err).toEqual({ InstructionError: [2, 'InvalidInstructionData'] });
    expect(r.exists(dst.toBase58())).toBe(false); // nothing of the refused ones stayed
    a = await send(tokenTx(400_000n, 6, k, Buffer.from('hello')));
    expect(a.error).toBeUndefined();
    expect(r.tokenBalance(mint.toBase58(), to.toBase58())).toBe(400_000n);
    expect(r.balance(k.publicKey.toBase58())).toBe(SOL - 5000n - rentExemptMinimum(165));
    const rec = r.transactions.at(-1)!;
    expect(rec.createdTokenAccounts).toEqual([dst.toBase58()]);
    expect(rec.memos).toEqual(['hello']);
    expect(rec.tokenTransfers[0]).toMatchObject({
      amount: 400_000n,
      decimals: 6,
      destinationOwner: to.toBase58(),
    });
    r.setFrozen(dst.toBase58(), true);
    r.advance(1);
    a = await send(tokenTx(1n, 6));
    expect(a.error?.data?.err).toEqual({ InstructionError: [1, { Custom: 0x11 }] });
  });

  it('includes a failing transaction sent without preflight: fee charged, err in its status', async () => {
    const k = funded();
    const sig = await conn.sendRawTransaction(
      (await transferTx(k, Keypair.generate().publicKey, 2n * SOL)).serialize(),
      {
        skipPreflight: true,
      },
    );
    expect(r.balance(k.publicKey.toBase58())).toBe(SOL - 5000n);
    const st = (await conn.getSignatureStatuses([sig])).value[0];
    expect(st?.err).toEqual({ InstructionError: [0, { Custom: 1 }] });
  });

  it('drops a verified transaction when told (answered, never included), and still refuses a bad one', async () => {
    const k = funded();
    const to = Keypair.generate().publicKey;
    r.failNext({ kind: 'drop' }, { count: 3 });
    const tx = await transferTx(k, to, SOL / 4n);
    const sig = await conn.sendRawTransaction(tx.serialize());
    expect(r.dropped).toContain(sig);
    expect((await conn.getSignatureStatuses([sig])).value[0]).toBeNull();
    expect(r.balance(to.toBase58())).toBe(0n);
    // A refused one is refused as usual, a drop or not.
    const a = await send(await transferTx(k, to, 2n * SOL));
    expect(a.error?.data?.err).toEqual({ InstructionError: [0, { Custom: 1 }] });
    r.clearFaults();
    expect(await conn.sendRawTransaction(tx.serialize())).toBe(sig);
    expect(r.balance(to.toBase58())).toBe(SOL / 4n);
  });

  it('injects faults: 503 once, a JSON-RPC error, a hang; answers JSON-RPC errors for bad requests', async () => {
    r.failNext({ kind: 'http', status: 503 }, { method: 'getBalance' });
    let res = await fetch(r.url, {
      method: 'POST',
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'getBalance',
        params: [Keypair.generate().publicKey.toBase58()],
      }),
    });
    expect(res.status).toBe(503);
    res = await fetch(r.url, {
      method: 'POST',
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'getBalance',
        params: [Keypair.generate().publicKey.toBase58()],
      }),
    });
    expect(res.status).toBe(200);
    r.failNext({ kind: 'rpc-error', code: -32005, message: 'Node is unhealthy' });
    expect((await rpc('getHealth', [])).error).toEqual({ code: -32005, message: 'Node is unhealthy' });
    expect((await rpc('getHealth', [])).result).toBe('ok');
    expect((await rpc('noSuchMethod', [])).error).toEqual({ code: -32601, message: 'Method not found' });
    expect((await rpc('getBalance', ['not-a-key'])).error?.code).toBe(-32602);
    r.failNext({ kind: 'hang' });
    await expect(
      fetch(r.url, {
        method: 'POST',
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'getSlot' }),
        signal: AbortSignal.timeout(200),
      }),
    ).rejects.toThrow();
    const bad = await fetch(r.url, { method: 'POST', body: '{' });
    expect(((await bad.json()) as { error: { code: number } }).error.code).toBe(-32700);
  });
});

describe('solana responder history: status cache, getTransaction, minimumLedgerSlot, getBlock', () => {
  it('forgets statuses after the status cache; history answers until pruned; -32011 without history', async () => {
    const n = await startSolanaResponder({ statusCacheSlots: 300 });
    try {
      const c = new Connection(n.url, 'confirmed');
      const getTx = async (sig: string, commitment: string) => {
        const res = await fetch(n.url, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({
            jsonrpc: '2.0',
            id: 1,
            method: 'getTransaction',
            params: [sig, { commitment, maxSupportedTransactionVersion: 0, encoding: 'base64' }],
          }),
        });
        return (await res.json()) as {
          result?: Record<string, unknown> | null;
          error?: { code: number; message: string };
        };
      };
      const k = Keypair.generate();
      n.fund(k.publicKey.toBase58(), SOL);
      const { blockhash } = await c.getLatestBlockhash();
      const tx = new Transaction({ feePayer: k.publicKey, recentBlockhash: blockhash }).add(
        SystemProgram.transfer({
          fromPubkey: k.publicKey,
          toPubkey: Keypair.generate().publicKey,
          lamports: SOL / 10n,
        }),
      );
      tx.sign(k);
      const sig = await c.sendRawTransaction(tx.serialize());
      const slot = n.transactions.find((t) => t.signature === sig)!.slot;
      // Not rooted yet: getTransaction at finalized does not find it; at confirmed it does.
      n.advance(1);
      expect((await getTx(sig, 'finalized')).result).toBeNull();
      expect((await getTx(sig, 'confirmed')).result!['slot']).toBe(slot);
      n.advance(400);
      // Out of the status cache: only a history search finds it.
      expect((await c.getSignatureStatuses([sig])).value[0]).toBeNull();
      const searched = await c.getSignatureStatuses([sig], { searchTransactionHistory: true });
      expect(searched.value[0]).toMatchObject({ slot, confirmationStatus: 'finalized', err: null });
      const got = (await getTx(sig, 'finalized')).result;
      expect(got).toMatchObject({ slot, meta: { err: null, fee: 5000 } });
      expect(await c.getMinimumLedgerSlot()).toBe(n.slot - n.blockHeight);
      const b = await c.getBlock(slot, {
        commitment: 'finalized',
        transactionDetails: 'none',
        rewards: false,
        maxSupportedTransactionVersion: 0,
      });
      expect(b!.blockHeight).toBe(n.transactions.find((t) => t.signature === sig)!.blockHeight);
      // Pruned below its slot: not found, blocks before the first available are cleaned up.
      n.setHistory({ fromSlot: slot + 1 });
      expect(await c.getMinimumLedgerSlot()).toBe(slot + 1);
      expect((await c.getSignatureStatuses([sig], { searchTransactionHistory: true })).value[0]).toBeNull();
      expect((await getTx(sig, 'finalized')).result).toBeNull();
      await expect(c.getBlock(slot, { maxSupportedTransactionVersion: 0 })).rejects.toThrow(/cleaned up/);
      // No history at all.
      n.setHistory('none');
      expect((await getTx(sig, 'finalized')).error).toEqual({
        code: -32011,
        message: 'Transaction history is not available from this node',
      });
    } finally {
      await n.close();
    }
  });
});
