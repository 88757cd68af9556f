import { createHash, createPublicKey, randomBytes, verify as edVerify } from 'node:crypto';
import {
  ACCOUNT_SIZE,
  ASSOCIATED_TOKEN_PROGRAM_ID,
  AccountLayout,
  AccountState,
  MINT_SIZE,
  MintLayout,
  TOKEN_PROGRAM_ID,
  TokenInstruction,
  decodeTransferCheckedInstruction,
  decodeTransferInstruction,
  getAssociatedTokenAddressSync,
  // @ts-expect-error TS1479: the package is ESM-typed but ships CommonJS (its `require` condition), which runs
} from '@solana/spl-token';
import {
  Keypair,
  PublicKey,
  SystemInstruction,
  SystemProgram,
  Transaction,
  TransactionMessage,
  VersionedMessage,
  VersionedTransaction,
} from '@solana/web3.js';
// @ts-expect-error TS1479: the package is ESM-typed but ships CommonJS (its `require` condition), which runs
import bs58 from 'bs58';
import { type ResponderAnswer, type ResponderRequest, type RunningResponder, serve } from './server.js';

/**
 * A local Solana node for tests: the JSON-RPC 2.0 API of a real validator's RPC port (`POST /`),
 * over a small ledger (system accounts, SPL Token mints and token accounts) whose blocks tests
 * make. `sendTransaction` verifies what it gets as a validator's preflight does: every signature
 * (web3.js / ed25519), the blockhash's age, the fee payer's funds, and it executes System
 * transfers, Associated Token Account creation, SPL Token Transfer/TransferChecked and Memo, with
 * the real error answers (`-32002` "Transaction simulation failed: …" with `data.err`, `-32003`
 * signature verification failure, `-32602` undecodable transaction).
 */

/** Lamports per signature, as on every public cluster. */
export const LAMPORTS_PER_SIGNATURE = 5000n;
/** A blockhash is usable for this many blocks after its own (MAX_PROCESSING_AGE). */
export const BLOCKHASH_VALID_BLOCKS = 150;
/** A transaction is finalized (rooted) this many blocks after the one that included it. */
export const FINALITY_DEPTH = 32;
/** The slot is the block height plus this (a cluster's skipped slots, fixed here). */
const SLOT_OFFSET = 1000;

export const MEMO_PROGRAM_ID = new PublicKey('MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr');
const COMPUTE_BUDGET_PROGRAM_ID = new PublicKey('ComputeBudget111111111111111111111111111111');
const SYSTEM = SystemProgram.programId.toBase58();

/** Rent-exempt minimum of an account with `space` bytes of data (the clusters' rent parameters). */
export function rentExemptMinimum(space: number): bigint {
  return BigInt((128 + space) * 3480 * 2);
}

interface Account {
  lamports: bigint;
  owner: string;
  data: Buffer;
  executable: boolean;
}

/** One transaction the responder verified and included. */
export interface SolanaRecordedTx {
  signature: string;
  /** All signatures (base58), fee payer first. */
  signatures: string[];
  /** The base64 wire transaction as sent. */
  wire: string;
  slot: number;
  blockHeight: number;
  feePayer: string;
  fee: bigint;
  recentBlockhash: string;
  /** The execution error (as `data.err` / the status's `err`), null when it succeeded. */
  err: unknown;
  /** SOL moved by System transfers. */
  solTransfers: { from: string; to: string; lamports: bigint }[];
  /** SPL tokens moved (token accounts and their owners). */
  tokenTransfers: {
    mint: string;
    source: string;
    destination: string;
    owner: string;
    destinationOwner: string;
    amount: bigint;
    decimals: number | null;
  }[];
  /** Token accounts created by the Associated Token Account program. */
  createdTokenAccounts: string[];
  memos: string[];
  logs: string[];
}

/** Ways to make the node misbehave for the next calls. */
export type SolanaFault =
  | { kind: 'http'; status: number; body?: string }
  | { kind: 'hang' }
  | { kind: 'rpc-error'; code: number; message: string; data?: unknown }
  /**
   * `sendTransaction` only: verified as usual and answered with its signature, but never included
   * (a leader that dropped it): its status stays null.
   */
  | { kind: 'drop' };

/** A running local Solana node with its test controls. */
export interface SolanaResponder extends RunningResponder {
  /** Credits `lamports` to a system account (created when missing). */
  fund(address: string, lamports: bigint | number): void;
  /** An account's lamports (0 when it does not exist). */
  balance(address: string): bigint;
  /** A new SPL Token mint of `decimals` (mint authority: a fresh key the responder keeps); its address. */
  createMint(decimals: number, address?: string): string;
  /** Mints `amount` base units to `owner`'s associated token account (created when missing); its address. */
  mintTo(mint: string, owner: string, amount: bigint | number): string;
  /** `owner`'s balance of `mint` in its associated token account (0 when none). */
  tokenBalance(mint: string, owner: string): bigint;
  /** Whether an account exists. */
  exists(address: string): boolean;
  /** Freezes (or thaws) a token account. */
  setFrozen(tokenAccount: string, frozen: boolean): void;
  /** Makes `n` blocks (one slot each, a new blockhash each). */
  advance(n?: number): void;
  /** The current block height / slot. */
  readonly blockHeight: number;
  readonly slot: number;
  /** The latest blockhash and its last valid block height. */
  latestBlockhash(): { blockhash: string; lastValidBlockHeight: number };
  /** Transactions verified and included, in order. */
  readonly transactions: SolanaRecordedTx[];
  /** Every JSON-RPC call received (method and params), in order. */
  readonly calls: { method: string; params: unknown[] }[];
  /** The next `count` calls (of `method` when given) fail as `fault` says. */
  failNext(fault: SolanaFault, o?: { count?: number; method?: string }): void;
  /** Forgets the faults not used yet. */
  clearFaults(): void;
  /** Signatures answered to `sendTransaction` but dropped (the `drop` fault). */
  readonly dropped: string[];
  /** Stops answering every call (requests hang until the responder closes) or resumes. */
  setDown(down: boolean): void;
  /**
   * Hides a recorded transaction from getSignatureStatuses (a node that has not seen it); sending
   * it again answers "already processed" and shows it again.
   */
  forget(signature: string): void;
  /**
   * What the node keeps beyond its status cache (`statusCacheSlots` at start): `full` every block
   * since genesis (the default); `none` no transaction history (getTransaction answers -32011,
   * getSignatureStatuses finds only cached statuses); `{ fromSlot }` blocks from that slot on
   * (minimumLedgerSlot; older transactions are not found).
   */
  setHistory(h: 'full' | 'none' | { fromSlot: number }): void;
}

/** JSON-RPC error with a validator's code. */
class RpcFail extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
  }
}

/** An execution failure: `err` as the validator writes TransactionError in JSON. */
class TxFail extends Error {
  constructor(
    readonly err: unknown,
    message: string,
    readonly logs: string[] = [],
  ) {
    super(message);
  }
}

function jsonSafe(v: unknown): unknown {
  return JSON.parse(JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? Number(x) : x)));
}

function blockhashOf(height: number, seed: Buffer): string {
  return bs58.encode(createHash('sha256').update(seed).update(`block:${height}`).digest());
}

/** ed25519 verification with node's crypto (v0 transactions; legacy ones go through web3.js as well). */
function edOk(pubkey: Uint8Array, message: Uint8Array, sig: Uint8Array): boolean {
  const key = createPublicKey({
    key: { kty: 'OKP', crv: 'Ed25519', x: Buffer.from(pubkey).toString('base64url') },
    format: 'jwk',
  });
  return edVerify(null, message, key, sig);
}

/** Starts a local Solana JSON-RPC node on 127.0.0.1 (a free port unless given). */
export async function startSolanaResponder(
  o: { port?: number; statusCacheSlots?: number } = {},
): Promise<SolanaResponder> {
  /** The status cache: signatures of the last this many slots (a validator's MAX_RECENT_BLOCKHASHES: 300). */
  const statusCacheSlots = o.statusCacheSlots ?? Number.POSITIVE_INFINITY;
  let history: 'full' | 'none' | { fromSlot: number } = 'full';
  const seed = randomBytes(16);
  const accounts = new Map<string, Account>();
  const hashes = new Map<string, number>(); // blockhash -> block height it was made at
  const byHeight: string[] = [];
  const recorded: SolanaRecordedTx[] = [];
  const bySig = new Map<string, SolanaRecordedTx>();
  const hidden = new Set<string>();
  const calls: { method: string; params: unknown[] }[] = [];
  const faults: { fault: SolanaFault; count: number; method?: string | undefined }[] = [];
  const hanging: (() => void)[] = [];
  const dropped: string[] = [];
  let down = false;
  let height = 0;

  const makeBlock = (): void => {
    const h = blockhashOf(height, seed);
    hashes.set(h, height);
    byHeight[height] = h;
  };
  makeBlock();

  const get = (a: string): Account | undefined => accounts.get(a);

  const readMint = (a: Account) => MintLayout.decode(a.data);
  const readToken = (a: Account) => AccountLayout.decode(a.data);
  const writeToken = (
    addr: string,
    t: ReturnType<typeof readToken>,
    st: Map<string, Account> = accounts,
  ): void => {
    const acc = st.get(addr)!;
    const data = Buffer.alloc(ACCOUNT_SIZE);
    AccountLayout.encode(t, data);
    acc.data = data;
  };
  const newTokenAccount = (mint: PublicKey, owner: PublicKey): Buffer => {
    const data = Buffer.alloc(ACCOUNT_SIZE);
    AccountLayout.encode(
      {
        mint,
        owner,
        amount: 0n,
        delegateOption: 0,
        delegate: PublicKey.default,
        state: AccountState.Initialized,
        isNativeOption: 0,
        isNative: 0n,
        delegatedAmount: 0n,
        closeAuthorityOption: 0,
        closeAuthority: PublicKey.default,
      },
      data,
    );
    return data;
  };

  const slotOf = (h: number) => h + SLOT_OFFSET;
  const context = () => ({ slot: slotOf(height), apiVersion: '2.2.7' });
  const commitmentOf = (cfg: unknown): string =>
    cfg && typeof cfg === 'object' && typeof (cfg as { commitment?: unknown }).commitment === 'string'
      ? (cfg as { commitment: string }).commitment
      : 'finalized';
  const heightAt = (commitment: string): number =>
    commitment === 'finalized' ? Math.max(0, height - FINALITY_DEPTH) : height;

  function accountJson(a: Account | undefined, encoding: string): unknown {
    if (!a) return null;
    let data: unknown;
    if (encoding === 'base64') data = [a.data.toString('base64'), 'base64'];
    else if (encoding === 'base58') data = [bs58.encode(a.data), 'base58'];
    else if (encoding === 'jsonParsed') data = [a.data.toString('base64'), 'base64'];
    else throw new RpcFail(-32602, `Invalid params: unknown encoding ${encoding}.`);
    return {
      data,
      executable: a.executable,
      lamports: Number(a.lamports),
      owner: a.owner,
      rentEpoch: 2 ** 64, // u64::MAX as a JSON number reads back (a double)
      space: a.data.length,
    };
  }

  function pubkeyParam(v: unknown): string {
    if (typeof v !== 'string') throw new RpcFail(-32602, 'Invalid params: expected a string.');
    try {
      const k = new PublicKey(v);
      if (k.toBase58() !== v) throw new Error('not canonical');
      return v;
    } catch {
      throw new RpcFail(-32602, 'Invalid param: Invalid');
    }
  }

  /** Executes a decoded transaction's instructions on `st` (a copy of the ledger). */
  function execute(
    msg: VersionedMessage,
    signers: Set<string>,
    st: Map<string, Account>,
    rec: SolanaRecordedTx,
  ): void {
    const ixs = TransactionMessage.decompile(msg).instructions;
    const logs = rec.logs;
    const touched = new Set<string>();
    const acct = (k: PublicKey): Account | undefined => st.get(k.toBase58());
    const debit = (i: number, from: string, lamports: bigint): void => {
      const a = st.get(from);
      const have = a?.lamports ?? 0n;
      if (!a || have < lamports) {
        logs.push(`Transfer: insufficient lamports ${have}, need ${lamports}`);
        logs.push(`Program ${SYSTEM} failed: custom program error: 0x1`);
        throw new TxFail(
          { InstructionError: [i, { Custom: 1 }] },
          `Error processing Instruction ${i}: custom program error: 0x1`,
        );
      }
      a.lamports -= lamports;
      touched.add(from);
    };
    const credit = (to: string, lamports: bigint): void => {
      const a = st.get(to) ?? { lamports: 0n, owner: SYSTEM, data: Buffer.alloc(0), executable: false };
      a.lamports += lamports;
      st.set(to, a);
      touched.add(to);
    };

    ixs.forEach((ix, i) => {
      const program = ix.programId.toBase58();
      logs.push(`Program ${program} invoke [1]`);
      if (ix.programId.equals(SystemProgram.programId)) {
        let type: string;
        try {
          type = SystemInstruction.decodeInstructionType(ix);
        } catch {
          throw new TxFail(
            { InstructionError: [i, 'InvalidInstructionData'] },
            `Error processing Instruction ${i}: invalid instruction data`,
          );
        }
        if (type !== 'Transfer') {
          throw new TxFail(
            { InstructionError: [i, 'InvalidInstructionData'] },
            `Error processing Instruction ${i}: invalid instruction data`,
          );
        }
        const t = SystemInstruction.decodeTransfer(ix);
        const from = t.fromPubkey.toBase58();
        if (!signers.has(from)) {
          throw new TxFail(
            { InstructionError: [i, 'MissingRequiredSignature'] },
            `Error processing Instruction ${i}: missing required signature for instruction`,
          );
        }
        const fa = acct(t.fromPubkey);
        if (fa && fa.data.length > 0) {
          logs.push('Transfer: `from` must not carry data');
          throw new TxFail(
            { InstructionError: [i, 'InvalidArgument'] },
            `Error processing Instruction ${i}: invalid program argument`,
          );
        }
        debit(i, from, t.lamports);
        credit(t.toPubkey.toBase58(), t.lamports);
        rec.solTransfers.push({ from, to: t.toPubkey.toBase58(), lamports: t.lamports });
      } else if (ix.programId.equals(ASSOCIATED_TOKEN_PROGRAM_ID)) {
        const kind = ix.data.length === 0 ? 0 : ix.data[0];
        if (kind !== 0 && kind !== 1) {
          throw new TxFail(
            { InstructionError: [i, 'InvalidInstructionData'] },
            `Error processing Instruction ${i}: invalid instruction data`,
          );
        }
        const [payer, ata, owner, mint, sys, tokenProgram] = ix.keys.map((k) => k.pubkey);
        if (!payer || !ata || !owner || !mint || !sys || !tokenProgram) {
          throw new TxFail(
            { InstructionError: [i, 'NotEnoughAccountKeys'] },
            `Error processing Instruction ${i}: insufficient account keys for instruction`,
          );
        }
        if (!tokenProgram.equals(TOKEN_PROGRAM_ID)) {
          throw new TxFail(
            { InstructionError: [i, 'IncorrectProgramId'] },
            `Error processing Instruction ${i}: incorrect program id for instruction`,
          );
        }
        const expected = getAssociatedTokenAddressSync(mint, owner, true, TOKEN_PROGRAM_ID);
        if (!expected.equals(ata)) {
          logs.push('Error: Associated address does not match seed derivation');
          throw new TxFail(
            { InstructionError: [i, 'InvalidSeeds'] },
            `Error processing Instruction ${i}: Provided seeds do not result in a valid address`,
          );
        }
        const m = acct(mint);
        if (!m || m.owner !== TOKEN_PROGRAM_ID.toBase58() || m.data.length !== MINT_SIZE) {
          throw new TxFail(
            { InstructionError: [i, 'IncorrectProgramId'] },
            `Error processing Instruction ${i}: incorrect program id for instruction`,
          );
        }
        const existing = acct(ata);
        if (existing && existing.owner === TOKEN_PROGRAM_ID.toBase58()) {
          if (kind === 1) {
            const t = readToken(existing);
            if (!t.owner.equals(owner)) {
              throw new TxFail(
                { InstructionError: [i, 'IllegalOwner'] },
                `Error processing Instruction ${i}: Provided owner is not allowed`,
              );
            }
            logs.push(`Program ${program} success`);
            return;
          }
          logs.push(`Allocate: account Address { address: ${ata.toBase58()}, base: None } already in use`);
          throw new TxFail(
            { InstructionError: [i, { Custom: 0 }] },
            `Error processing Instruction ${i}: custom program error: 0x0`,
          );
        }
        if (!signers.has(payer.toBase58())) {
          throw new TxFail(
            { InstructionError: [i, 'MissingRequiredSignature'] },
            `Error processing Instruction ${i}: missing required signature for instruction`,
          );
        }
        const rent = rentExemptMinimum(ACCOUNT_SIZE);
        const prior = existing?.lamports ?? 0n;
        const need = rent > prior ? rent - prior : 0n;
        debit(i, payer.toBase58(), need);
        st.set(ata.toBase58(), {
          lamports: prior + need,
          owner: TOKEN_PROGRAM_ID.toBase58(),
          data: newTokenAccount(mint, owner),
          executable: false,
        });
        touched.add(ata.toBase58());
        rec.createdTokenAccounts.push(ata.toBase58());
      } else if (ix.programId.equals(TOKEN_PROGRAM_ID)) {
        const op = ix.data[0];
        let source: PublicKey, destination: PublicKey, owner: PublicKey, amount: bigint;
        let mintKey: PublicKey | null = null;
        let decimals: number | null = null;
        try {
          if (op === TokenInstruction.TransferChecked) {
            const d = decodeTransferCheckedInstruction(ix, TOKEN_PROGRAM_ID);
            source = d.keys.source.pubkey;
            destination = d.keys.destination.pubkey;
            owner = d.keys.owner.pubkey;
            mintKey = d.keys.mint.pubkey;
            amount = d.data.amount;
            decimals = d.data.decimals;
          } else if (op === TokenInstruction.Transfer) {
            const d = decodeTransferInstruction(ix, TOKEN_PROGRAM_ID);
            source = d.keys.source.pubkey;
            destination = d.keys.destination.pubkey;
            owner = d.keys.owner.pubkey;
            amount = d.data.amount;
          } else {
            throw new Error('unsupported');
          }
        } catch {
          throw new TxFail(
            { InstructionError: [i, 'InvalidInstructionData'] },
            `Error processing Instruction ${i}: invalid instruction data`,
          );
        }
        logs.push(`Program log: Instruction: ${decimals === null ? 'Transfer' : 'TransferChecked'}`);
        const tokenFail = (code: number, what: string): never => {
          logs.push(`Program log: Error: ${what}`);
          throw new TxFail(
            { InstructionError: [i, { Custom: code }] },
            `Error processing Instruction ${i}: custom program error: 0x${code.toString(16)}`,
          );
        };
        const sa = acct(source);
        const da = acct(destination);
        if (!sa || sa.owner !== TOKEN_PROGRAM_ID.toBase58()) {
          throw new TxFail(
            { InstructionError: [i, 'InvalidAccountData'] },
            `Error processing Instruction ${i}: invalid account data for instruction`,
          );
        }
        if (!da || da.owner !== TOKEN_PROGRAM_ID.toBase58()) {
          throw new TxFail(
            { InstructionError: [i, 'InvalidAccountData'] },
            `Error processing Instruction ${i}: invalid account data for instruction`,
          );
        }
        const s = readToken(sa);
        const d = readToken(da);
        if (s.state === AccountState.Frozen || d.state === AccountState.Frozen)
          tokenFail(0x11, 'Account is frozen');
        if (!s.mint.equals(d.mint)) tokenFail(0x3, 'Account not associated with this Mint');
        if (mintKey) {
          if (!s.mint.equals(mintKey)) tokenFail(0x3, 'Account not associated with this Mint');
          const m = acct(mintKey);
          if (!m)
            throw new TxFail(
              { InstructionError: [i, 'InvalidAccountData'] },
              `Error processing Instruction ${i}: invalid account data for instruction`,
            );
          if (readMint(m).decimals !== decimals)
            tokenFail(0x12, 'The provided decimals value different from the Mint decimals');
        }
        if (!s.owner.equals(owner)) tokenFail(0x4, 'owner does not match');
        if (!signers.has(owner.toBase58())) {
          throw new TxFail(
            { InstructionError: [i, 'MissingRequiredSignature'] },
            `Error processing Instruction ${i}: missing required signature for instruction`,
          );
        }
        if (s.amount < amount) tokenFail(0x1, 'insufficient funds');
        s.amount -= amount;
        writeToken(source.toBase58(), s, st);
        const d2 = readToken(st.get(destination.toBase58())!);
        d2.amount += amount;
        writeToken(destination.toBase58(), d2, st);
        rec.tokenTransfers.push({
          mint: s.mint.toBase58(),
          source: source.toBase58(),
          destination: destination.toBase58(),
          owner: owner.toBase58(),
          destinationOwner: d.owner.toBase58(),
          amount,
          decimals,
        });
      } else if (ix.programId.equals(MEMO_PROGRAM_ID)) {
        for (const k of ix.keys) {
          if (!signers.has(k.pubkey.toBase58())) {
            throw new TxFail(
              { InstructionError: [i, 'MissingRequiredSignature'] },
              `Error processing Instruction ${i}: missing required signature for instruction`,
            );
          }
        }
        let text: string;
        try {
          text = new TextDecoder('utf-8', { fatal: true }).decode(ix.data);
        } catch {
          logs.push('Program log: Invalid UTF-8, from byte 0');
          throw new TxFail(
            { InstructionError: [i, 'InvalidInstructionData'] },
            `Error processing Instruction ${i}: invalid instruction data`,
          );
        }
        logs.push(`Program log: Memo (len ${ix.data.length}): ${JSON.stringify(text)}`);
        rec.memos.push(text);
      } else if (ix.programId.equals(COMPUTE_BUDGET_PROGRAM_ID)) {
        // Compute budget requests: nothing to execute here.
      } else {
        throw new TxFail('ProgramAccountNotFound', 'Attempt to load a program that does not exist');
      }
      logs.push(`Program ${program} success`);
    });

    // The runtime's rent rule: an account the transaction changed ends empty or rent-exempt.
    const keys = msg.staticAccountKeys.map((k) => k.toBase58());
    for (const addr of touched) {
      const a = st.get(addr)!;
      if (a.lamports === 0n) {
        if (a.data.length === 0) st.delete(addr);
        continue;
      }
      if (a.lamports < rentExemptMinimum(a.data.length)) {
        const idx = keys.indexOf(addr);
        throw new TxFail(
          { InsufficientFundsForRent: { account_index: idx } },
          `Transaction results in an account (${idx}) with insufficient funds for rent`,
        );
      }
    }
  }

  function sendTransaction(params: unknown[], drop = false): string {
    const [encoded, cfg] = params as [unknown, Record<string, unknown> | undefined];
    const encoding = (cfg?.encoding as string | undefined) ?? 'base58';
    if (typeof encoded !== 'string') throw new RpcFail(-32602, 'Invalid params: expected a string.');
    let raw: Buffer;
    try {
      if (encoding === 'base64') raw = Buffer.from(encoded, 'base64');
      else if (encoding === 'base58') raw = Buffer.from(bs58.decode(encoded));
      else throw new Error('encoding');
    } catch {
      throw new RpcFail(-32602, `invalid transaction: Invalid ${encoding} encoding`);
    }
    let vtx: VersionedTransaction;
    try {
      vtx = VersionedTransaction.deserialize(raw);
    } catch (e) {
      throw new RpcFail(
        -32602,
        `failed to deserialize solana_sdk::transaction::versioned::VersionedTransaction: ${e instanceof Error ? e.message : String(e)}`,
      );
    }
    const msg = vtx.message;
    if (msg.version !== 'legacy' && msg.addressTableLookups.length > 0) {
      throw new RpcFail(-32602, 'invalid transaction: address table lookups are not supported by this node');
    }
    const n = msg.header.numRequiredSignatures;
    if (vtx.signatures.length !== n || n === 0) {
      throw new RpcFail(
        -32602,
        'invalid transaction: Transaction failed to sanitize accounts offsets correctly',
      );
    }
    const msgBytes = msg.serialize();
    const keys = msg.staticAccountKeys;
    let sigOk = vtx.signatures.every((s, i) => edOk(keys[i]!.toBytes(), msgBytes, s));
    if (sigOk && msg.version === 'legacy') {
      // The chain library's own check as well (web3.js verifies every required signature).
      sigOk = Transaction.from(raw).verifySignatures(true);
    }
    if (!sigOk) throw new RpcFail(-32003, 'Transaction signature verification failure');
    const signature = bs58.encode(vtx.signatures[0]!);
    const skipPreflight = cfg?.skipPreflight === true;

    const simFail = (err: unknown, message: string, logs: string[] = []): never => {
      throw new RpcFail(-32002, `Transaction simulation failed: ${message}`, {
        accounts: null,
        err,
        innerInstructions: null,
        loadedAccountsDataSize: 0,
        logs,
        replacementBlockhash: null,
        returnData: null,
        unitsConsumed: 0,
      });
    };
    if (bySig.has(signature)) {
      hidden.delete(signature);
      simFail('AlreadyProcessed', 'This transaction has already been processed');
    }
    const bhHeight = hashes.get(msg.recentBlockhash);
    if (bhHeight === undefined || height > bhHeight + BLOCKHASH_VALID_BLOCKS) {
      simFail('BlockhashNotFound', 'Blockhash not found');
    }
    const feePayer = keys[0]!.toBase58();
    const fee = LAMPORTS_PER_SIGNATURE * BigInt(n);
    const payer = accounts.get(feePayer);
    if (!payer)
      simFail('AccountNotFound', 'Attempt to debit an account but found no record of a prior credit.');
    if (payer!.lamports < fee) simFail('InsufficientFundsForFee', 'Insufficient funds for fee');

    if (drop) {
      // Preflight passed (checked on a copy below), then the leader never includes it.
      const scratch = new Map<string, Account>();
      for (const [k, a] of accounts) scratch.set(k, { ...a, data: Buffer.from(a.data) });
      scratch.get(feePayer)!.lamports -= fee;
      try {
        execute(msg, new Set(keys.slice(0, n).map((k) => k.toBase58())), scratch, {
          ...emptyRecord(),
          logs: [],
        });
      } catch (e) {
        if (e instanceof TxFail && !skipPreflight) simFail(e.err, e.message);
        if (!(e instanceof TxFail)) throw e;
      }
      dropped.push(signature);
      return signature;
    }
    const signers = new Set(keys.slice(0, n).map((k) => k.toBase58()));
    const rec: SolanaRecordedTx = {
      signature,
      signatures: vtx.signatures.map((s) => bs58.encode(s)),
      wire: raw.toString('base64'),
      slot: slotOf(height),
      blockHeight: height,
      feePayer,
      fee,
      recentBlockhash: msg.recentBlockhash,
      err: null,
      solTransfers: [],
      tokenTransfers: [],
      createdTokenAccounts: [],
      memos: [],
      logs: [],
    };
    // Execute on a copy: the fee first (the payer must stay rent-exempt or empty), then the instructions.
    const copy = new Map<string, Account>();
    for (const [k, a] of accounts) copy.set(k, { ...a, data: Buffer.from(a.data) });
    copy.get(feePayer)!.lamports -= fee;
    try {
      execute(msg, signers, copy, rec);
    } catch (e) {
      if (!(e instanceof TxFail)) throw e;
      if (!skipPreflight) simFail(e.err, e.message, rec.logs);
      // Without preflight the cluster includes it as failed: the fee is charged, nothing else.
      accounts.get(feePayer)!.lamports -= fee;
      rec.err = e.err;
      rec.solTransfers = [];
      rec.tokenTransfers = [];
      rec.createdTokenAccounts = [];
      rec.memos = [];
      recorded.push(rec);
      bySig.set(signature, rec);
      return signature;
    }
    accounts.clear();
    for (const [k, a] of copy) accounts.set(k, a);
    recorded.push(rec);
    bySig.set(signature, rec);
    return signature;
  }

  function emptyRecord(): SolanaRecordedTx {
    return {
      signature: '',
      signatures: [],
      wire: '',
      slot: 0,
      blockHeight: 0,
      feePayer: '',
      fee: 0n,
      recentBlockhash: '',
      err: null,
      solTransfers: [],
      tokenTransfers: [],
      createdTokenAccounts: [],
      memos: [],
      logs: [],
    };
  }

  /** The first slot the node has blocks of (its ledger's lowest), undefined without history. */
  const minimumSlot = (): number | undefined =>
    history === 'none' ? undefined : history === 'full' ? slotOf(0) : Math.max(slotOf(0), history.fromSlot);
  /** True when the node's blockstore holds the transaction's block. */
  const inHistory = (rec: SolanaRecordedTx): boolean => {
    const min = minimumSlot();
    return min !== undefined && rec.slot >= min;
  };
  const inStatusCache = (rec: SolanaRecordedTx): boolean => slotOf(height) - rec.slot <= statusCacheSlots;

  function statusOf(sig: string, searchHistory: boolean): unknown {
    const rec = bySig.get(sig);
    if (!rec || hidden.has(sig)) return null;
    if (!inStatusCache(rec) && !(searchHistory && inHistory(rec))) return null;
    const depth = height - rec.blockHeight;
    const finalized = depth >= FINALITY_DEPTH;
    return {
      slot: rec.slot,
      confirmations: finalized ? null : depth,
      err: rec.err,
      status: rec.err === null ? { Ok: null } : { Err: rec.err },
      confirmationStatus: finalized ? 'finalized' : depth >= 1 ? 'confirmed' : 'processed',
    };
  }

  function call(method: string, params: unknown[]): unknown {
    switch (method) {
      case 'getHealth':
        return 'ok';
      case 'getVersion':
        return { 'feature-set': 3294202862, 'solana-core': '2.2.7' };
      case 'getGenesisHash':
        return byHeight[0];
      case 'getSlot':
        return slotOf(heightAt(commitmentOf(params[0])));
      case 'getBlockHeight':
        return heightAt(commitmentOf(params[0]));
      case 'getLatestBlockhash': {
        const h = heightAt(commitmentOf(params[0]));
        return {
          context: context(),
          value: { blockhash: byHeight[h], lastValidBlockHeight: h + BLOCKHASH_VALID_BLOCKS },
        };
      }
      case 'isBlockhashValid': {
        const bh = hashes.get(String(params[0]));
        return { context: context(), value: bh !== undefined && height <= bh + BLOCKHASH_VALID_BLOCKS };
      }
      case 'getBalance': {
        const a = get(pubkeyParam(params[0]));
        return { context: context(), value: Number(a?.lamports ?? 0n) };
      }
      case 'getAccountInfo': {
        const addr = pubkeyParam(params[0]);
        const cfg = (params[1] ?? {}) as { encoding?: string };
        return { context: context(), value: accountJson(get(addr), cfg.encoding ?? 'base58') };
      }
      case 'getMultipleAccounts': {
        const list = params[0];
        if (!Array.isArray(list)) throw new RpcFail(-32602, 'Invalid params: expected an array.');
        const cfg = (params[1] ?? {}) as { encoding?: string };
        return {
          context: context(),
          value: list.map((a) => accountJson(get(pubkeyParam(a)), cfg.encoding ?? 'base64')),
        };
      }
      case 'getMinimumBalanceForRentExemption': {
        const space = params[0];
        if (typeof space !== 'number' || !Number.isInteger(space) || space < 0) {
          throw new RpcFail(-32602, 'Invalid params: expected a usize.');
        }
        return Number(rentExemptMinimum(space));
      }
      case 'getFeeForMessage': {
        if (typeof params[0] !== 'string') throw new RpcFail(-32602, 'Invalid params: expected a string.');
        let m: VersionedMessage;
        try {
          m = VersionedMessage.deserialize(Buffer.from(params[0], 'base64'));
        } catch {
          throw new RpcFail(-32602, 'invalid message: failed to deserialize');
        }
        const bh = hashes.get(m.recentBlockhash);
        if (bh === undefined || height > bh + BLOCKHASH_VALID_BLOCKS)
          return { context: context(), value: null };
        return {
          context: context(),
          value: Number(LAMPORTS_PER_SIGNATURE * BigInt(m.header.numRequiredSignatures)),
        };
      }
      case 'sendTransaction':
        return sendTransaction(params);
      case 'getSignatureStatuses': {
        const list = params[0];
        if (!Array.isArray(list)) throw new RpcFail(-32602, 'Invalid params: expected an array.');
        if (list.length > 256) throw new RpcFail(-32602, 'Too many inputs provided; max 256');
        const search = (params[1] as { searchTransactionHistory?: unknown } | undefined)
          ?.searchTransactionHistory;
        return { context: context(), value: list.map((s) => statusOf(String(s), search === true)) };
      }
      case 'minimumLedgerSlot': {
        const min = minimumSlot();
        if (min === undefined)
          throw new RpcFail(-32011, 'Transaction history is not available from this node');
        return min;
      }
      case 'getBlock': {
        const slot = params[0];
        if (typeof slot !== 'number' || !Number.isInteger(slot) || slot < 0) {
          throw new RpcFail(-32602, 'Invalid params: expected a u64.');
        }
        const min = minimumSlot();
        if (min !== undefined && slot < min) {
          throw new RpcFail(
            -32001,
            `Block ${slot} cleaned up, does not exist on node. First available block: ${min}`,
          );
        }
        const h = slot - SLOT_OFFSET;
        if (min === undefined || h < 0 || h > heightAt(commitmentOf(params[1]))) {
          throw new RpcFail(-32009, `Slot ${slot} was skipped, or missing in long-term storage`);
        }
        return {
          blockHeight: h,
          blockTime: null,
          blockhash: byHeight[h],
          parentSlot: h === 0 ? slot : slot - 1,
          previousBlockhash: h === 0 ? byHeight[0] : byHeight[h - 1],
        };
      }
      case 'getTransaction': {
        if (history === 'none') {
          throw new RpcFail(-32011, 'Transaction history is not available from this node');
        }
        const cfg = (params[1] ?? {}) as { commitment?: string; encoding?: string };
        const rec = bySig.get(String(params[0]));
        const depth = rec ? height - rec.blockHeight : -1;
        // Found once in a block at the asked commitment (finalized: rooted), and in the node's ledger.
        if (!rec || depth < (commitmentOf(cfg) === 'finalized' ? FINALITY_DEPTH : 1) || !inHistory(rec))
          return null;
        if (cfg.encoding !== undefined && cfg.encoding !== 'base64' && cfg.encoding !== 'base58') {
          throw new RpcFail(
            -32602,
            `Invalid params: this node answers getTransaction in base64 or base58 only.`,
          );
        }
        const wire = Buffer.from(rec.wire, 'base64');
        return {
          slot: rec.slot,
          blockTime: null,
          transaction: cfg.encoding === 'base58' ? [bs58.encode(wire), 'base58'] : [rec.wire, 'base64'],
          meta: {
            err: rec.err,
            fee: Number(rec.fee),
            logMessages: rec.logs,
            status: rec.err === null ? { Ok: null } : { Err: rec.err },
          },
        };
      }
      default:
        throw new RpcFail(-32601, 'Method not found');
    }
  }

  function takeFault(method: string): SolanaFault | undefined {
    const i = faults.findIndex(
      (f) =>
        (f.method === undefined || f.method === method) &&
        (f.fault.kind !== 'drop' || method === 'sendTransaction'),
    );
    if (i < 0) return undefined;
    const f = faults[i]!;
    f.count -= 1;
    if (f.count <= 0) faults.splice(i, 1);
    return f.fault;
  }

  async function one(req: unknown): Promise<unknown | { http: ResponderAnswer }> {
    const r = req as { jsonrpc?: unknown; id?: unknown; method?: unknown; params?: unknown };
    const id = r?.id ?? null;
    if (!r || typeof r !== 'object' || r.jsonrpc !== '2.0' || typeof r.method !== 'string') {
      return { jsonrpc: '2.0', error: { code: -32600, message: 'Invalid request' }, id };
    }
    const params = r.params === undefined ? [] : r.params;
    if (!Array.isArray(params)) {
      return { jsonrpc: '2.0', error: { code: -32602, message: 'Invalid params: expected an array.' }, id };
    }
    calls.push({ method: r.method, params });
    const fault = takeFault(r.method);
    if (fault?.kind === 'http')
      return { http: { status: fault.status, text: fault.body ?? 'Service Unavailable' } };
    if (fault?.kind === 'hang')
      return {
        http: await new Promise<ResponderAnswer>((res) =>
          hanging.push(() => res({ status: 503, text: 'closed' })),
        ),
      };
    if (fault?.kind === 'drop' && r.method === 'sendTransaction') {
      try {
        return { jsonrpc: '2.0', result: sendTransaction(params, true), id };
      } catch (e) {
        if (e instanceof RpcFail) {
          return {
            jsonrpc: '2.0',
            error: {
              code: e.code,
              message: e.message,
              ...(e.data !== undefined ? { data: jsonSafe(e.data) } : {}),
            },
            id,
          };
        }
        throw e;
      }
    }
    if (fault?.kind === 'rpc-error') {
      return {
        jsonrpc: '2.0',
        error: {
          code: fault.code,
          message: fault.message,
          ...(fault.data !== undefined ? { data: fault.data } : {}),
        },
        id,
      };
    }
    try {
      return { jsonrpc: '2.0', result: jsonSafe(call(r.method, params)), id };
    } catch (e) {
      if (e instanceof RpcFail) {
        return {
          jsonrpc: '2.0',
          error: {
            code: e.code,
            message: e.message,
            ...(e.data !== undefined ? { data: jsonSafe(e.data) } : {}),
          },
          id,
        };
      }
      throw e;
    }
  }

  const handle = async (req: ResponderRequest): Promise<ResponderAnswer> => {
    if (down)
      return new Promise<ResponderAnswer>((res) => hanging.push(() => res({ status: 503, text: 'closed' })));
    if (req.method === 'GET' && req.path === '/health') return { status: 200, text: 'ok' };
    if (req.method !== 'POST' || req.path !== '/')
      return { status: 405, text: 'Used HTTP Method is not allowed. POST or OPTIONS is required' };
    let body: unknown;
    try {
      body = JSON.parse(req.body);
    } catch {
      return {
        status: 200,
        json: { jsonrpc: '2.0', error: { code: -32700, message: 'Parse error' }, id: null },
      };
    }
    if (Array.isArray(body)) {
      const out: unknown[] = [];
      for (const b of body) {
        const a = await one(b);
        if (a && typeof a === 'object' && 'http' in a) return (a as { http: ResponderAnswer }).http;
        out.push(a);
      }
      return { status: 200, json: out };
    }
    const a = await one(body);
    if (a && typeof a === 'object' && 'http' in a) return (a as { http: ResponderAnswer }).http;
    return { status: 200, json: a };
  };

  const running = await serve(handle, o.port !== undefined ? { port: o.port } : {});
  const mintAuthority = Keypair.generate().publicKey;

  const ataOf = (mint: string, owner: string): string =>
    getAssociatedTokenAddressSync(new PublicKey(mint), new PublicKey(owner), true).toBase58();

  const responder: SolanaResponder = {
    url: running.url,
    port: running.port,
    async close() {
      for (const h of hanging.splice(0)) h();
      await running.close();
    },
    fund(address, lamports) {
      const a = accounts.get(pubkeyParam(address));
      if (a) a.lamports += BigInt(lamports);
      else
        accounts.set(address, {
          lamports: BigInt(lamports),
          owner: SYSTEM,
          data: Buffer.alloc(0),
          executable: false,
        });
    },
    balance: (address) => accounts.get(address)?.lamports ?? 0n,
    exists: (address) => accounts.has(address),
    createMint(decimals, address) {
      const mint = address ?? Keypair.generate().publicKey.toBase58();
      const data = Buffer.alloc(MINT_SIZE);
      MintLayout.encode(
        {
          mintAuthorityOption: 1,
          mintAuthority,
          supply: 0n,
          decimals,
          isInitialized: true,
          freezeAuthorityOption: 0,
          freezeAuthority: PublicKey.default,
        },
        data,
      );
      accounts.set(mint, {
        lamports: rentExemptMinimum(MINT_SIZE),
        owner: TOKEN_PROGRAM_ID.toBase58(),
        data,
        executable: false,
      });
      return mint;
    },
    mintTo(mint, owner, amount) {
      const m = accounts.get(mint);
      if (!m || m.owner !== TOKEN_PROGRAM_ID.toBase58()) throw new Error(`no mint ${mint}`);
      const ata = ataOf(mint, owner);
      if (!accounts.has(ata)) {
        accounts.set(ata, {
          lamports: rentExemptMinimum(ACCOUNT_SIZE),
          owner: TOKEN_PROGRAM_ID.toBase58(),
          data: newTokenAccount(new PublicKey(mint), new PublicKey(owner)),
          executable: false,
        });
      }
      const t = readToken(accounts.get(ata)!);
      t.amount += BigInt(amount);
      writeToken(ata, t);
      const md = readMint(m);
      md.supply += BigInt(amount);
      const data = Buffer.alloc(MINT_SIZE);
      MintLayout.encode(md, data);
      m.data = data;
      return ata;
    },
    tokenBalance(mint, owner) {
      const a = accounts.get(ataOf(mint, owner));
      return a ? readToken(a).amount : 0n;
    },
    setFrozen(tokenAccount, frozen) {
      const t = readToken(accounts.get(tokenAccount)!);
      t.state = frozen ? AccountState.Frozen : AccountState.Initialized;
      writeToken(tokenAccount, t);
    },
    advance(n = 1) {
      for (let i = 0; i < n; i++) {
        height += 1;
        makeBlock();
      }
    },
    get blockHeight() {
      return height;
    },
    get slot() {
      return slotOf(height);
    },
    latestBlockhash: () => ({
      blockhash: byHeight[height]!,
      lastValidBlockHeight: height + BLOCKHASH_VALID_BLOCKS,
    }),
    transactions: recorded,
    calls,
    failNext(fault, opts = {}) {
      faults.push({ fault, count: opts.count ?? 1, method: opts.method });
    },
    clearFaults() {
      faults.length = 0;
    },
    dropped,
    setDown(d) {
      down = d;
      if (!d) for (const h of hanging.splice(0)) h();
    },
    forget(signature) {
      hidden.add(signature);
    },
    setHistory(h) {
      history = h;
    },
  };
  return responder;
}
