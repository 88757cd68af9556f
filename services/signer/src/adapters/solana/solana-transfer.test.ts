import { createPublicKey, verify as edVerify } from 'node:crypto';
import { CustosError } from '@custos/service-kit';
import { type SolanaResponder, startSolanaResponder } from '@custos/chain-responders/solana';
import {
  ASSOCIATED_TOKEN_PROGRAM_ID,
  TOKEN_PROGRAM_ID,
  decodeTransferCheckedInstruction,
  getAssociatedTokenAddressSync,
  // @ts-expect-error TS1479: the package is ESM-typed but ships CommonJS (its `require` condition), which runs
} from '@solana/spl-token';
import {
  Connection,
  Keypair,
  PublicKey,
  SystemInstruction,
  SystemProgram,
  Transaction,
  TransactionMessage,
  VersionedTransaction,
} from '@solana/web3.js';
// @ts-expect-error TS1479: the package is ESM-typed but ships CommonJS (its `require` condition), which runs
import bs58 from 'bs58';
import type { ChainRecord } from '../../chains/chain-types.js';
import {
  ChainRpcError,
  type ChainEndpoint,
  type PrepareContext,
  type PreparedTransfer,
  type TransferInput,
} from '../../keys/chain-adapter.js';
import { solanaAdapter } from './index.js';
import { MEMO_PROGRAM_ID, type SolanaUnsigned } from './solana-transfer.js';

const ops = solanaAdapter.transfers!;
const SOL = 1_000_000_000n;
const RENT_0 = 890_880n; // the clusters' rent-exempt minimum of a 0-byte account
const RENT_TOKEN = 2_039_280n; // … of a 165-byte token account

function chainOf(url: string, name = 'solana-devnet'): ChainRecord {
  return {
    id: '00000000-0000-4000-8000-000000000002',
    name,
    displayName: name,
    chainId: 0n,
    family: 'solana',
    rpcUrl: url,
    wsUrl: '',
    explorerUrl: '',
    nativeCurrency: 'SOL',
    nativeDecimals: 9,
    isTestnet: true,
    isEnabled: true,
    createdAt: new Date(),
    updatedAt: new Date(),
  };
}

let r: SolanaResponder;
let ep: ChainEndpoint;

beforeAll(async () => {
  r = await startSolanaResponder();
  ep = { chain: chainOf(r.url), url: r.url, timeoutMs: 3000 };
});
afterAll(async () => {
  await r.close();
});

interface Agent {
  privateKey: Buffer;
  address: string;
  ctx: PrepareContext;
}

function agent(lamports?: bigint): Agent {
  const k = solanaAdapter.generate();
  if (lamports !== undefined) r.fund(k.address, lamports);
  const key = { address: k.address, publicKey: k.publicKey };
  return {
    privateKey: k.privateKey,
    address: k.address,
    ctx: { endpoint: ep, key, from: k.address, inputsInUse: async () => new Set<string>() },
  };
}

const newAddress = () => Keypair.generate().publicKey.toBase58();

async function prepare(a: Agent, input: Partial<TransferInput> & { to: string; value: string }) {
  const parsed = ops.parse(input, ep.chain);
  return (await ops.prepare(a.ctx, parsed)) as PreparedTransfer<SolanaUnsigned>;
}

async function sign(a: Agent, p: PreparedTransfer) {
  return ops.sign(a.privateKey, p, { chain: ep.chain, key: a.ctx.key });
}

/** The signed wire transaction checked with web3.js and node's ed25519, independently of the adapter. */
function verified(signedTx: string, signer: string) {
  const raw = Buffer.from(signedTx, 'base64');
  const vtx = VersionedTransaction.deserialize(raw);
  expect(vtx.message.header.numRequiredSignatures).toBe(1);
  expect(vtx.message.staticAccountKeys[0]!.toBase58()).toBe(signer);
  const pub = createPublicKey({
    key: {
      kty: 'OKP',
      crv: 'Ed25519',
      x: Buffer.from(new PublicKey(signer).toBytes()).toString('base64url'),
    },
    format: 'jwk',
  });
  expect(edVerify(null, vtx.message.serialize(), pub, vtx.signatures[0]!)).toBe(true);
  const legacy = Transaction.from(raw);
  expect(legacy.verifySignatures(true)).toBe(true);
  return { vtx, legacy, instructions: TransactionMessage.decompile(vtx.message).instructions };
}

/** The error `fn` throws (fails the test when it throws none). */
async function caught(fn: () => unknown): Promise<unknown> {
  try {
    await fn();
  } catch (e) {
    return e;
  }
  throw new Error('expected an error');
}

async function refusal(fn: () => unknown) {
  const e = await caught(fn);
  expect(e).toBeInstanceOf(CustosError);
  const c = e as CustosError;
  expect(c.httpStatus).toBe(400);
  return { field: c.field, type: c.type, detail: c.detail };
}

describe('solana transfers against the local node', () => {
  it('sends SOL: prepare, sign (verified independently), broadcast, pending, then confirmed once finalized', async () => {
    const a = agent(3n * SOL);
    const to = newAddress();
    const p = await prepare(a, { to, value: '1.25' });
    const bh = r.latestBlockhash();
    expect(p.value).toBe(1_250_000_000n);
    expect(p.to).toBe(to);
    expect(p.fee).toBe(5000n);
    expect(p.inputs).toEqual([]);
    expect(p.expiry).toEqual({ kind: 'block_height', value: BigInt(bh.lastValidBlockHeight) });
    expect(p.details).toMatchObject({
      network: 'devnet',
      blockhash: bh.blockhash,
      fee_lamports: '5000',
      creates_account: true,
    });
    const s = await sign(a, p);
    const { vtx, instructions } = verified(s.signedTx, a.address);
    expect(s.txHash).toBe(bs58.encode(vtx.signatures[0]!));
    expect(vtx.message.recentBlockhash).toBe(bh.blockhash);
    expect(instructions).toHaveLength(1);
    const t = SystemInstruction.decodeTransfer(instructions[0]!);
    expect(t.fromPubkey.toBase58()).toBe(a.address);
    expect(t.toPubkey.toBase58()).toBe(to);
    expect(t.lamports).toBe(1_250_000_000n);

    const status = (x = s) => ops.status(ep, { ...x, expiry: p.expiry });
    expect(await status()).toEqual({ state: 'unknown' });
    await ops.broadcast(ep, s);
    const rec = r.transactions.find((x) => x.signature === s.txHash)!;
    expect(rec.err).toBeNull();
    expect(rec.solTransfers).toEqual([{ from: a.address, to, lamports: 1_250_000_000n }]);
    expect(r.balance(to)).toBe(1_250_000_000n);
    expect(r.balance(a.address)).toBe(3n * SOL - 1_250_000_000n - 5000n);
    expect(await status()).toEqual({ state: 'pending' });
    r.advance(1);
    expect(await status()).toEqual({ state: 'pending' }); // confirmed, not finalized yet
    r.advance(30);
    expect(await status()).toEqual({ state: 'pending' });
    r.advance(1); // 32 blocks deep: finalized
    expect(await status()).toEqual({ state: 'confirmed', block: BigInt(rec.slot) });
  });

  it('sends an integer value as lamports, to an existing account below the new-account minimum', async () => {
    const a = agent(SOL);
    const to = newAddress();
    r.fund(to, RENT_0);
    const p = await prepare(a, { to, value: '1000' });
    expect(p.value).toBe(1000n);
    expect(p.details['creates_account']).toBeUndefined();
    const s = await sign(a, p);
    await ops.broadcast(ep, s);
    expect(r.balance(to)).toBe(RENT_0 + 1000n);
  });

  it('may empty the account (amount + fee = balance); refuses leaving less than the rent-exempt minimum', async () => {
    const a = agent(SOL);
    const to = newAddress();
    const left = await refusal(() => prepare(a, { to, value: String(SOL - 5000n - 1000n) }));
    expect(left).toMatchObject({ field: 'value', type: 'insufficient_funds' });
    expect(left.detail).toMatch(/rent-exempt minimum/);
    const p = await prepare(a, { to, value: String(SOL - 5000n) });
    await ops.broadcast(ep, await sign(a, p));
    expect(r.balance(a.address)).toBe(0n);
    expect(r.exists(a.address)).toBe(false);
    expect(r.balance(to)).toBe(SOL - 5000n);
  });

  it('signs only: the output parses, its signature verifies, nothing reaches the node', async () => {
    const a = agent(SOL);
    const to = newAddress();
    const before = r.calls.filter((c) => c.method === 'sendTransaction').length;
    const p = await prepare(a, { to, value: '0.01', memo: 'invoice 42 ✓' });
    const s = await sign(a, p);
    const { instructions } = verified(s.signedTx, a.address);
    expect(instructions.map((i) => i.programId.toBase58())).toEqual([
      SystemProgram.programId.toBase58(),
      MEMO_PROGRAM_ID.toBase58(),
    ]);
    expect(Buffer.from(instructions[1]!.data).toString('utf8')).toBe('invoice 42 ✓');
    expect(instructions[1]!.keys.map((k) => [k.pubkey.toBase58(), k.isSigner])).toEqual([[a.address, true]]);
    expect(r.calls.filter((c) => c.method === 'sendTransaction').length).toBe(before);
    expect(r.transactions.find((x) => x.signature === s.txHash)).toBeUndefined();
    // Signing the same prepared transfer twice gives the same bytes (ed25519 is deterministic).
    expect(await sign(a, p)).toEqual(s);
  });

  it('refuses to sign a prepared transfer with another key', async () => {
    const a = agent(SOL);
    const b = agent();
    const p = await prepare(a, { to: newAddress(), value: '0.01' });
    await expect(async () => sign(b, p)).rejects.toThrow(/not for this key/);
  });

  it('sends SPL tokens with TransferChecked, creating the recipient token account (rent paid by the key) and a memo', async () => {
    const a = agent(SOL);
    const mint = r.createMint(6);
    r.mintTo(mint, a.address, 10_000_000n);
    const to = newAddress();
    const p = await prepare(a, { to, value: '2.5', tokenMint: mint, memo: 'pay' });
    expect(p.value).toBe(2_500_000n);
    expect(p.fee).toBe(5000n + RENT_TOKEN);
    const destAta = getAssociatedTokenAddressSync(new PublicKey(mint), new PublicKey(to)).toBase58();
    const srcAta = getAssociatedTokenAddressSync(new PublicKey(mint), new PublicKey(a.address)).toBase58();
    expect(p.details).toMatchObject({
      creates_token_account: true,
      rent_lamports: RENT_TOKEN.toString(),
      source_token_account: srcAta,
      destination_token_account: destAta,
      fee_lamports: '5000',
    });
    const s = await sign(a, p);
    const { instructions } = verified(s.signedTx, a.address);
    expect(instructions.map((i) => i.programId.toBase58())).toEqual([
      ASSOCIATED_TOKEN_PROGRAM_ID.toBase58(),
      TOKEN_PROGRAM_ID.toBase58(),
      MEMO_PROGRAM_ID.toBase58(),
    ]);
    const tc = decodeTransferCheckedInstruction(instructions[1]!, TOKEN_PROGRAM_ID);
    expect(tc.data.amount).toBe(2_500_000n);
    expect(tc.data.decimals).toBe(6);
    expect(tc.keys.destination.pubkey.toBase58()).toBe(destAta);
    await ops.broadcast(ep, s);
    const rec = r.transactions.find((x) => x.signature === s.txHash)!;
    expect(rec.createdTokenAccounts).toEqual([destAta]);
    expect(rec.tokenTransfers).toEqual([
      {
        mint,
        source: srcAta,
        destination: destAta,
        owner: a.address,
        destinationOwner: to,
        amount: 2_500_000n,
        decimals: 6,
      },
    ]);
    expect(rec.memos).toEqual(['pay']);
    expect(r.tokenBalance(mint, to)).toBe(2_500_000n);
    expect(r.tokenBalance(mint, a.address)).toBe(7_500_000n);
    expect(r.balance(a.address)).toBe(SOL - 5000n - RENT_TOKEN);

    // The second transfer finds the account: no creation, no rent.
    const p2 = await prepare(a, { to, value: '1000', tokenMint: mint });
    expect(p2.fee).toBe(5000n);
    expect(p2.details['creates_token_account']).toBeUndefined();
    await ops.broadcast(ep, await sign(a, p2));
    expect(r.tokenBalance(mint, to)).toBe(2_501_000n);
  });

  it('checks token_decimals against the mint, and the mint itself', async () => {
    const a = agent(SOL);
    const mint9 = r.createMint(9);
    r.mintTo(mint9, a.address, 10n * SOL);
    expect(await refusal(() => prepare(a, { to: newAddress(), value: '1', tokenMint: mint9 }))).toMatchObject(
      {
        field: 'token_decimals',
      },
    );
    const ok = await prepare(a, { to: newAddress(), value: '1.5', tokenMint: mint9, tokenDecimals: 9 });
    expect(ok.value).toBe(1_500_000_000n);
    expect(
      await refusal(() => prepare(a, { to: newAddress(), value: '1', tokenMint: newAddress() })),
    ).toMatchObject({
      field: 'token_mint',
    });
    // A system account is not a mint.
    expect(
      await refusal(() => prepare(a, { to: newAddress(), value: '1', tokenMint: a.address })),
    ).toMatchObject({
      field: 'token_mint',
    });
  });

  it('refuses tokens to an off-curve address (a token account or PDA) and SOL-short token transfers', async () => {
    const a = agent(SOL);
    const mint = r.createMint(6);
    const ata = r.mintTo(mint, a.address, 5_000_000n);
    expect(await refusal(() => prepare(a, { to: ata, value: '1.0', tokenMint: mint }))).toMatchObject({
      field: 'to',
    });
    // More tokens than held; no token account at all.
    expect(
      await refusal(() => prepare(a, { to: newAddress(), value: '5.000001', tokenMint: mint })),
    ).toMatchObject({
      field: 'value',
      type: 'insufficient_funds',
    });
    const b = agent(SOL);
    expect(
      await refusal(() => prepare(b, { to: newAddress(), value: '1.0', tokenMint: mint })),
    ).toMatchObject({
      field: 'value',
      type: 'insufficient_funds',
    });
    // Tokens enough, SOL not enough for the new account's rent.
    const c = agent(RENT_TOKEN);
    r.mintTo(mint, c.address, 5_000_000n);
    const short = await refusal(() => prepare(c, { to: newAddress(), value: '1.0', tokenMint: mint }));
    expect(short).toMatchObject({ field: 'value', type: 'insufficient_funds' });
    expect(short.detail).toMatch(/rent/);
    // … but enough when the recipient's account exists (fee only).
    const to = newAddress();
    r.mintTo(mint, to, 1n);
    expect((await prepare(c, { to, value: '1.0', tokenMint: mint })).fee).toBe(5000n);
    // A frozen source account.
    r.setFrozen(r.mintTo(mint, a.address, 0n), true);
    expect(await refusal(() => prepare(a, { to, value: '1.0', tokenMint: mint }))).toMatchObject({
      field: 'token_mint',
    });
  });

  it('refuses SOL beyond the balance, and a new account below the rent-exempt minimum', async () => {
    const a = agent(SOL);
    expect(await refusal(() => prepare(a, { to: newAddress(), value: '1.0' }))).toMatchObject({
      field: 'value',
      type: 'insufficient_funds',
    });
    const unfunded = agent();
    expect(await refusal(() => prepare(unfunded, { to: newAddress(), value: '0.1' }))).toMatchObject({
      field: 'value',
      type: 'insufficient_funds',
    });
    const dust = await refusal(() => prepare(a, { to: newAddress(), value: String(RENT_0 - 1n) }));
    expect(dust.field).toBe('value');
    expect(dust.type).not.toBe('insufficient_funds');
    expect(dust.detail).toMatch(/rent-exempt minimum of 890880/);
    // Off-curve recipients may take SOL.
    const [pda] = PublicKey.findProgramAddressSync([Buffer.from('vault')], new PublicKey(a.address));
    expect((await prepare(a, { to: pda.toBase58(), value: String(RENT_0) })).to).toBe(pda.toBase58());
  });

  it('refuses malformed addresses and the fields Solana has not (400 naming each field)', async () => {
    const c = ep.chain;
    const to = newAddress();
    const field = (input: TransferInput) => {
      try {
        ops.parse(input, c);
      } catch (e) {
        expect(e).toBeInstanceOf(CustosError);
        return (e as CustosError).field;
      }
      return 'none';
    };
    for (const bad of [
      '',
      '0x52908400098527886E0F7030069857D2E4169EE7',
      'bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq',
      `${to}x`,
      'O0Il',
    ]) {
      expect(field({ to: bad, value: '1' })).toBe('to');
    }
    expect(field({ to, value: '1', destinationTag: 1 })).toBe('destination_tag');
    expect(field({ to, value: '1', feeRateSatPerVbyte: 2 })).toBe('fee_rate_sat_per_vbyte');
    expect(field({ to, value: '1', feeLimitSun: 3 })).toBe('fee_limit_sun');
    expect(field({ to, value: '1', ttl: 60 })).toBe('ttl');
    expect(field({ to, value: '1', data: '0xabcd' })).toBe('data');
    expect(field({ to, value: '1', tokenDecimals: 6 })).toBe('token_decimals');
    expect(field({ to, value: '1', tokenMint: 'nope' })).toBe('token_mint');
    expect(field({ to, value: '1', tokenMint: to, tokenDecimals: 256 })).toBe('token_decimals');
    expect(field({ to, value: '0' })).toBe('value');
    expect(field({ to, value: '0.0000000001' })).toBe('value'); // 10 decimals: below a lamport
    expect(field({ to, value: '-1' })).toBe('value');
    expect(field({ to, value: '1', memo: 'x'.repeat(567) })).toBe('memo');
    expect(field({ to, value: '1', memo: '€'.repeat(189) })).toBe('memo'); // 567 bytes of UTF-8
    expect(field({ to, value: '1', memo: 'x'.repeat(566) })).toBe('none');
    expect(field({ to, value: '1', data: '' })).toBe('none');
    expect(field({ to, value: '1', memo: '', tokenMint: '' })).toBe('none');
    expect(ops.parse({ to, value: '1', memo: '', tokenMint: '' }, c)).toEqual({ to, value: '1' });
  });
});

describe('solana broadcast and status: the node’s answers mapped', () => {
  it('a second broadcast of the same bytes is already known', async () => {
    const a = agent(SOL);
    const s = await sign(a, await prepare(a, { to: newAddress(), value: '0.01' }));
    await ops.broadcast(ep, s);
    const e = (await caught(() => ops.broadcast(ep, s))) as ChainRpcError;
    expect(e).toBeInstanceOf(ChainRpcError);
    expect(e.alreadyKnown).toBe(true);
    expect(e.rejected).toBe(false);
  });

  it('a bad signature is rejected', async () => {
    const a = agent(SOL);
    const s = await sign(a, await prepare(a, { to: newAddress(), value: '0.01' }));
    const raw = Buffer.from(s.signedTx, 'base64');
    raw[10] ^= 0xff; // inside the signature
    const e = (await caught(() =>
      ops.broadcast(ep, { ...s, signedTx: raw.toString('base64') }),
    )) as ChainRpcError;
    expect(e).toBeInstanceOf(ChainRpcError);
    expect(e.rejected).toBe(true);
    expect(e.message).toMatch(/signature verification failure/);
    expect(r.transactions.find((x) => x.signature === s.txHash)).toBeUndefined();
  });

  it('an expired blockhash is rejected, and the unsent transfer ends expired once finalized past its last valid height', async () => {
    const a = agent(SOL);
    const p = await prepare(a, { to: newAddress(), value: '0.01' });
    const s = await sign(a, p);
    const status = () => ops.status(ep, { ...s, expiry: p.expiry });
    r.advance(151);
    const e = (await caught(() => ops.broadcast(ep, s))) as ChainRpcError;
    expect(e.rejected).toBe(true);
    expect(e.message).toMatch(/Blockhash not found/);
    expect(await status()).toEqual({ state: 'unknown' }); // the finalized height is not past it yet
    r.advance(31);
    expect(await status()).toEqual({ state: 'unknown' });
    r.advance(1);
    expect(await status()).toMatchObject({ state: 'expired' });
  });

  it('a transfer the balance no longer covers is rejected by preflight (two prepared from one balance)', async () => {
    const a = agent(SOL);
    const p1 = await prepare(a, { to: newAddress(), value: '0.6' });
    const p2 = await prepare(a, { to: newAddress(), value: '0.6' });
    await ops.broadcast(ep, await sign(a, p1));
    const e = (await caught(async () => ops.broadcast(ep, await sign(a, p2)))) as ChainRpcError;
    expect(e.rejected).toBe(true);
    expect(e.message).toMatch(/custom program error: 0x1/);
    expect(e.message).toMatch(/InstructionError/);
  });

  it('503, a node error code and a node that does not answer are not refusals', async () => {
    const a = agent(SOL);
    const s = await sign(a, await prepare(a, { to: newAddress(), value: '0.01' }));
    r.failNext({ kind: 'http', status: 503 }, { method: 'sendTransaction' });
    let e = (await caught(() => ops.broadcast(ep, s))) as ChainRpcError;
    expect(e).toBeInstanceOf(ChainRpcError);
    expect(e.rejected).toBe(false);
    expect(e.alreadyKnown).toBe(false);
    r.failNext({
      kind: 'rpc-error',
      code: -32005,
      message: 'Node is unhealthy',
      data: { numSlotsBehind: 42 },
    });
    e = (await caught(() => ops.broadcast(ep, s))) as ChainRpcError;
    expect(e.rejected).toBe(false);
    const slow = { ...ep, timeoutMs: 300 };
    r.failNext({ kind: 'hang' });
    e = (await caught(() => ops.broadcast(slow, s))) as ChainRpcError;
    expect(e).toBeInstanceOf(ChainRpcError);
    expect(e.rejected).toBe(false);
    r.failNext({ kind: 'hang' });
    await expect(ops.status(slow, { ...s })).rejects.toBeInstanceOf(ChainRpcError);
    // The node never got it: now it takes it.
    await ops.broadcast(ep, s);
    expect(r.transactions.find((x) => x.signature === s.txHash)).toBeDefined();
  });

  it("a node's JSON-RPC error on a read is a failed call, not a refusal; a node without getFeeForMessage prices 5,000 per signature", async () => {
    const a = agent(SOL);
    r.failNext({ kind: 'rpc-error', code: -32005, message: 'Node is unhealthy' }, { method: 'getBalance' });
    const e = (await caught(() => prepare(a, { to: newAddress(), value: '0.1' }))) as ChainRpcError;
    expect(e).toBeInstanceOf(ChainRpcError);
    expect(e.rejected).toBe(false);
    expect(e.message).toMatch(/Node is unhealthy/);
    r.failNext(
      { kind: 'rpc-error', code: -32601, message: 'Method not found' },
      { method: 'getFeeForMessage' },
    );
    const p = await prepare(a, { to: newAddress(), value: '0.1' });
    expect(p.fee).toBe(5000n);
    expect(r.calls.at(-1)?.method).toBe('getFeeForMessage');
    r.failNext(
      { kind: 'rpc-error', code: -32603, message: 'Internal error' },
      { method: 'getFeeForMessage' },
    );
    expect(
      ((await caught(() => prepare(a, { to: newAddress(), value: '0.1' }))) as ChainRpcError).rejected,
    ).toBe(false);
  });

  it('prepare reports a node that does not answer as a ChainRpcError', async () => {
    const a = agent(SOL);
    r.setDown(true);
    try {
      const e = (await caught(() =>
        ops.prepare({ ...a.ctx, endpoint: { ...ep, timeoutMs: 300 } }, { to: newAddress(), value: '1' }),
      )) as ChainRpcError;
      expect(e).toBeInstanceOf(ChainRpcError);
      expect(e.rejected).toBe(false);
    } finally {
      r.setDown(false);
    }
  });

  it('a transaction the node forgot is unknown; sending it again is already known and it shows again', async () => {
    const a = agent(SOL);
    const p = await prepare(a, { to: newAddress(), value: '0.01' });
    const s = await sign(a, p);
    await ops.broadcast(ep, s);
    r.forget(s.txHash);
    expect(await ops.status(ep, { ...s, expiry: p.expiry })).toEqual({ state: 'unknown' });
    expect(((await caught(() => ops.broadcast(ep, s))) as ChainRpcError).alreadyKnown).toBe(true);
    expect(await ops.status(ep, { ...s, expiry: p.expiry })).toEqual({ state: 'pending' });
  });

  it('a transaction included with an execution error is failed once finalized', async () => {
    // Sent by web3.js itself without preflight (signer always uses preflight), so the cluster includes it failed.
    const kp = Keypair.generate();
    r.fund(kp.publicKey.toBase58(), SOL);
    const conn = new Connection(r.url, 'confirmed');
    const { blockhash, lastValidBlockHeight } = await conn.getLatestBlockhash();
    const tx = new Transaction({ feePayer: kp.publicKey, blockhash, lastValidBlockHeight }).add(
      SystemProgram.transfer({
        fromPubkey: kp.publicKey,
        toPubkey: Keypair.generate().publicKey,
        lamports: 2n * SOL,
      }),
    );
    tx.sign(kp);
    const sig = await conn.sendRawTransaction(tx.serialize(), { skipPreflight: true });
    const t = {
      txHash: sig,
      signedTx: tx.serialize().toString('base64'),
      expiry: { kind: 'block_height' as const, value: BigInt(lastValidBlockHeight) },
    };
    expect(await ops.status(ep, t)).toEqual({ state: 'pending' });
    r.advance(32);
    const st = await ops.status(ep, t);
    expect(st).toMatchObject({ state: 'failed' });
    expect(st.state === 'failed' && st.reason).toMatch(/"Custom":1/);
    expect(r.balance(kp.publicKey.toBase58())).toBe(SOL - 5000n);
  });
});

describe('solana status past the status cache (a node without full history)', () => {
  // A validator's status cache holds ~300 slots of signatures; beyond, only its ledger history can say.
  let n: SolanaResponder;
  let nep: ChainEndpoint;
  beforeEach(async () => {
    n = await startSolanaResponder({ statusCacheSlots: 300 });
    nep = { chain: chainOf(n.url), url: n.url, timeoutMs: 3000 };
  });
  afterEach(async () => {
    await n.close();
  });

  async function sentAndForgotten() {
    const k = solanaAdapter.generate();
    n.fund(k.address, SOL);
    const key = { address: k.address, publicKey: k.publicKey };
    const ctx = { endpoint: nep, key, from: k.address, inputsInUse: async () => new Set<string>() };
    const p = (await ops.prepare(
      ctx,
      ops.parse({ to: newAddress(), value: '0.1' }, nep.chain),
    )) as PreparedTransfer;
    const s = await ops.sign(k.privateKey, p, { chain: nep.chain, key });
    await ops.broadcast(nep, s);
    const rec = n.transactions.find((x) => x.signature === s.txHash)!;
    const status = () => ops.status(nep, { ...s, expiry: p.expiry });
    n.advance(32);
    expect(await status()).toEqual({ state: 'confirmed', block: BigInt(rec.slot) });
    // Long after: out of the status cache, the finalized height far past its last valid height.
    n.advance(400);
    expect(BigInt(n.blockHeight - 32)).toBeGreaterThan(p.expiry!.value);
    return { s, p, rec, status };
  }

  it('a finalized transfer the node keeps no history of stays pending (-32011), never expired', async () => {
    const { status } = await sentAndForgotten();
    n.setHistory('none');
    expect(await status()).toEqual({ state: 'pending' });
    // The finalized height was read before the status.
    const methods = n.calls.map((c) => c.method);
    const last = methods.lastIndexOf('getSignatureStatuses');
    expect(methods.lastIndexOf('getBlockHeight')).toBeLessThan(last);
    expect(methods.slice(last)).toContain('getTransaction');
  });

  it('a finalized transfer older than the node’s ledger (minimumLedgerSlot) stays pending', async () => {
    const { status, rec } = await sentAndForgotten();
    n.setHistory({ fromSlot: rec.slot + 5 });
    expect(await status()).toEqual({ state: 'pending' });
  });

  it('a transfer getTransaction finds at finalized is confirmed (or failed) by its meta when the status is not found', async () => {
    const { status, rec } = await sentAndForgotten();
    // A status lookup that misses it (load-balanced endpoint): getTransaction still has it.
    n.setHistory({ fromSlot: rec.slot - 1 });
    n.forget(rec.signature);
    expect(await status()).toEqual({ state: 'confirmed', block: BigInt(rec.slot), fee: 5000n });
  });

  it('a transfer never included ends expired when the node holds every block since its blockhash', async () => {
    const k = solanaAdapter.generate();
    n.fund(k.address, SOL);
    const key = { address: k.address, publicKey: k.publicKey };
    const ctx = { endpoint: nep, key, from: k.address, inputsInUse: async () => new Set<string>() };
    const p = (await ops.prepare(
      ctx,
      ops.parse({ to: newAddress(), value: '0.1' }, nep.chain),
    )) as PreparedTransfer;
    const s = await ops.sign(k.privateKey, p, { chain: nep.chain, key });
    n.advance(151 + 33);
    expect(await ops.status(nep, { ...s, expiry: p.expiry })).toMatchObject({ state: 'expired' });
    // A node whose ledger starts after the blockhash cannot say: pending.
    n.setHistory({ fromSlot: n.slot - 10 });
    expect(await ops.status(nep, { ...s, expiry: p.expiry })).toEqual({ state: 'pending' });
  });

  it('says what the key can spend: lamports above the rent-exempt minimum, all of them for a sweep, the token balance', async () => {
    const k = solanaAdapter.generate();
    n.fund(k.address, 3n * SOL);
    const key = { address: k.address, publicKey: k.publicKey };
    const ctx = { endpoint: nep, key, from: k.address, inputsInUse: async () => new Set<string>() };
    const prep = async (i: Partial<TransferInput> & { to: string; value: string }) =>
      (await ops.prepare(ctx, ops.parse(i, nep.chain))) as PreparedTransfer;
    expect((await prep({ to: newAddress(), value: '1.5' })).available).toEqual({ native: 3n * SOL - RENT_0 });
    expect((await prep({ to: newAddress(), value: String(3n * SOL - 5000n) })).available).toEqual({
      native: 3n * SOL,
    });
    const mint = n.createMint(6);
    n.mintTo(mint, k.address, 4_000_000n);
    const t = await prep({ to: Keypair.generate().publicKey.toBase58(), value: '1', tokenMint: mint });
    expect(t.available).toEqual({ native: 3n * SOL - RENT_0, token: 4_000_000n });
  });
});
