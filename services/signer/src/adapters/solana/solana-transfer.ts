import { InvalidArgumentError } from '@custos/service-kit';
import {
  PublicKey,
  SystemProgram,
  Transaction,
  TransactionInstruction,
  VersionedMessage,
  VersionedTransaction,
} from '@solana/web3.js';
// @ts-expect-error TS1479: the package is ESM-typed but ships CommonJS (its `require` condition), which runs
import bs58 from 'bs58';
import type { ChainRecord } from '../../chains/chain-types.js';
import {
  type ChainEndpoint,
  type PrepareContext,
  type PreparedTransfer,
  type SignedTransfer,
  type TransferInput,
  type TransferOps,
  type TransferStatus,
  insufficientFunds,
  parseTransferAmount,
} from '../../keys/chain-adapter.js';
import { forget, keypairOf, solanaNetworkOf, solanaPublicKey } from './solana-keys.js';
import { spl } from './spl-token.js';
import type * as SplToken from '@solana/spl-token' with { 'resolution-mode': 'import' };
import {
  type SolanaAccount,
  accountInfo,
  balanceOf,
  blockHeight,
  feeForMessage,
  finalizedTransaction,
  latestBlockhash,
  lowestBlockHeight,
  rentExemptMinimum,
  sendTransaction,
  signatureStatus,
} from './solana-node.js';

const {
  ACCOUNT_SIZE,
  AccountState,
  TOKEN_2022_PROGRAM_ID,
  TOKEN_PROGRAM_ID,
  createAssociatedTokenAccountIdempotentInstruction,
  createTransferCheckedInstruction,
  getAssociatedTokenAddressSync,
  unpackAccount,
  unpackMint,
} = spl;

/** The SPL Memo program (v2: checks that the accounts it names signed). */
export const MEMO_PROGRAM_ID = new PublicKey('MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr');
/** The longest memo accepted, in UTF-8 bytes (what fits a transaction beside a transfer). */
export const MAX_MEMO_BYTES = 566;
/** The base fee per signature when the node does not price the message (`getFeeForMessage`). */
export const LAMPORTS_PER_SIGNATURE = 5000n;
/** A serialized transaction may be at most this many bytes (the packet size the clusters take). */
export const MAX_TRANSACTION_BYTES = 1232;
/** Token decimals when the request names none. */
export const DEFAULT_TOKEN_DECIMALS = 6;

/** What `sign` gets from `prepare`: the compiled legacy message (base64) the key signs. */
export interface SolanaUnsigned {
  message: string;
  feePayer: string;
  blockhash: string;
  lastValidBlockHeight: string;
}

const REFUSED_FIELDS: [keyof TransferInput, string][] = [
  ['destinationTag', 'destination_tag'],
  ['feeRateSatPerVbyte', 'fee_rate_sat_per_vbyte'],
  ['feeLimitSun', 'fee_limit_sun'],
  ['ttl', 'ttl'],
];

/** The request's fields checked for Solana (InvalidArgumentError naming the field). */
export function parseSolanaTransfer(input: TransferInput, chain: ChainRecord): TransferInput {
  if (input.data !== undefined && input.data !== '' && input.data !== '0x') {
    throw new InvalidArgumentError('data', `calldata is for EVM chains; ${chain.name} takes none`);
  }
  for (const [k, field] of REFUSED_FIELDS) {
    if (input[k] !== undefined) throw new InvalidArgumentError(field, `is not supported on ${chain.name}`);
  }
  const to = solanaPublicKey(input.to);
  if (!to) throw new InvalidArgumentError('to', 'must be a Solana address (base58 of a 32-byte public key)');
  const out: TransferInput = { to: to.toBase58(), value: input.value };
  // An empty token_mint is no token (as absent), as an empty memo is no memo.
  if (input.tokenMint !== undefined && input.tokenMint !== '') {
    const mint = solanaPublicKey(input.tokenMint);
    if (!mint) throw new InvalidArgumentError('token_mint', 'must be a Solana mint address (base58)');
    const decimals = input.tokenDecimals ?? DEFAULT_TOKEN_DECIMALS;
    if (!Number.isInteger(decimals) || decimals < 0 || decimals > 255) {
      throw new InvalidArgumentError('token_decimals', 'must be an integer from 0 to 255');
    }
    out.tokenMint = mint.toBase58();
    out.tokenDecimals = decimals;
    parseTransferAmount(input.value, decimals);
  } else {
    if (input.tokenDecimals !== undefined) {
      throw new InvalidArgumentError('token_decimals', 'is only for a token transfer (with token_mint)');
    }
    parseTransferAmount(input.value, chain.nativeDecimals);
  }
  if (input.memo !== undefined && input.memo !== '') {
    const bytes = Buffer.byteLength(input.memo, 'utf8');
    if (bytes > MAX_MEMO_BYTES) {
      throw new InvalidArgumentError(
        'memo',
        `must be at most ${MAX_MEMO_BYTES} bytes of UTF-8 (it is ${bytes})`,
      );
    }
    out.memo = input.memo;
  }
  return out;
}

function memoInstruction(memo: string, signer: PublicKey): TransactionInstruction {
  return new TransactionInstruction({
    programId: MEMO_PROGRAM_ID,
    keys: [{ pubkey: signer, isSigner: true, isWritable: false }],
    data: Buffer.from(memo, 'utf8'),
  });
}

/** The lamports left after paying `spend` must be none or at least the rent-exempt minimum. */
function checkLamports(balance: bigint, spend: bigint, rentMin: bigint, what: string): void {
  if (balance < spend) {
    throw insufficientFunds(`the key's ${balance} lamports do not cover ${what} (${spend} lamports)`);
  }
  const left = balance - spend;
  if (left > 0n && left < rentMin) {
    throw insufficientFunds(
      `${what} (${spend} lamports) would leave ${left} lamports, below the rent-exempt minimum of ${rentMin}: ` +
        `spend all of it or leave at least ${rentMin}`,
    );
  }
}

/** A mint of the classic SPL Token program, its decimals checked against the request's. */
function checkMint(mint: PublicKey, acc: SolanaAccount | null, decimals: number, chain: ChainRecord): void {
  if (!acc) throw new InvalidArgumentError('token_mint', `no such mint on ${chain.name}`);
  if (acc.owner === TOKEN_2022_PROGRAM_ID.toBase58()) {
    throw new InvalidArgumentError('token_mint', 'Token-2022 mints are not supported yet (SPL Token only)');
  }
  if (acc.owner !== TOKEN_PROGRAM_ID.toBase58()) {
    throw new InvalidArgumentError('token_mint', 'is not an SPL Token mint');
  }
  let m: ReturnType<typeof unpackMint>;
  try {
    m = unpackMint(
      mint,
      { ...acc, lamports: Number(acc.lamports), owner: new PublicKey(acc.owner), rentEpoch: 0 },
      TOKEN_PROGRAM_ID,
    );
  } catch {
    throw new InvalidArgumentError('token_mint', 'is not an SPL Token mint');
  }
  if (m.decimals !== decimals) {
    throw new InvalidArgumentError(
      'token_decimals',
      `the mint has ${m.decimals} decimals, not ${decimals}: give token_decimals ${m.decimals}`,
    );
  }
}

function tokenAccountOf(address: PublicKey, acc: SolanaAccount): ReturnType<typeof unpackAccount> {
  return unpackAccount(
    address,
    { ...acc, lamports: Number(acc.lamports), owner: new PublicKey(acc.owner), rentEpoch: 0 },
    TOKEN_PROGRAM_ID,
  );
}

/** Builds the transfer from the chain's state (see TransferOps.prepare). */
export async function prepareSolanaTransfer(
  ctx: PrepareContext,
  raw: TransferInput,
): Promise<PreparedTransfer<SolanaUnsigned>> {
  const ep = ctx.endpoint;
  const chain = ep.chain;
  const input = parseSolanaTransfer(raw, chain);
  const from = solanaPublicKey(ctx.from);
  if (!from) throw new Error(`the key's address ${ctx.from} is not a Solana address`);
  const to = new PublicKey(input.to);
  const details: Record<string, string | number | boolean> = { network: solanaNetworkOf(chain) };

  const instructions: TransactionInstruction[] = [];
  let value: bigint;
  let rent = 0n;
  let tokenBalance: bigint | undefined;
  const [bh, balance, rentMin] = await Promise.all([
    latestBlockhash(ep),
    balanceOf(ep, from.toBase58()),
    rentExemptMinimum(ep, 0),
  ]);

  if (input.tokenMint === undefined) {
    value = parseTransferAmount(input.value, chain.nativeDecimals);
    const recipient = await accountInfo(ep, to.toBase58());
    if (!recipient && value < rentMin) {
      throw new InvalidArgumentError(
        'value',
        `${to.toBase58()} has no account yet; the first transfer to it must be at least the rent-exempt minimum of ${rentMin} lamports`,
      );
    }
    if (!recipient) details['creates_account'] = true;
    instructions.push(SystemProgram.transfer({ fromPubkey: from, toPubkey: to, lamports: value }));
  } else {
    const decimals = input.tokenDecimals ?? DEFAULT_TOKEN_DECIMALS;
    const mint = new PublicKey(input.tokenMint);
    if (!PublicKey.isOnCurve(to.toBytes())) {
      throw new InvalidArgumentError(
        'to',
        'a token recipient must be a wallet address (an ed25519 public key), not a program-derived or token account address',
      );
    }
    const source = getAssociatedTokenAddressSync(mint, from, false, TOKEN_PROGRAM_ID);
    const destination = getAssociatedTokenAddressSync(mint, to, false, TOKEN_PROGRAM_ID);
    const [mintAcc, sourceAcc, toAcc, destAcc, ataRent] = await Promise.all([
      accountInfo(ep, mint.toBase58()),
      accountInfo(ep, source.toBase58()),
      accountInfo(ep, to.toBase58()),
      accountInfo(ep, destination.toBase58()),
      rentExemptMinimum(ep, ACCOUNT_SIZE),
    ]);
    checkMint(mint, mintAcc, decimals, chain);
    value = parseTransferAmount(input.value, decimals);
    if (
      toAcc &&
      (toAcc.owner === TOKEN_PROGRAM_ID.toBase58() || toAcc.owner === TOKEN_2022_PROGRAM_ID.toBase58())
    ) {
      throw new InvalidArgumentError('to', "is a token account; give its owner's wallet address");
    }
    if (!sourceAcc || sourceAcc.owner !== TOKEN_PROGRAM_ID.toBase58()) {
      throw insufficientFunds(`the key has no token account for ${mint.toBase58()} (balance 0)`);
    }
    const src = tokenAccountOf(source, sourceAcc);
    tokenBalance = src.amount;
    if (src.isFrozen)
      throw new InvalidArgumentError('token_mint', "the key's token account for this mint is frozen");
    if (src.amount < value) {
      throw insufficientFunds(`the key's token balance ${src.amount} does not cover ${value}`);
    }
    if (destAcc) {
      if (destAcc.owner !== TOKEN_PROGRAM_ID.toBase58()) {
        throw new InvalidArgumentError(
          'to',
          "the recipient's associated token address holds another kind of account",
        );
      }
      const dst = tokenAccountOf(destination, destAcc);
      if (dst.isFrozen || (dst as { state?: SplToken.AccountState }).state === AccountState.Frozen) {
        throw new InvalidArgumentError('to', "the recipient's token account for this mint is frozen");
      }
    } else {
      rent = ataRent;
      instructions.push(
        createAssociatedTokenAccountIdempotentInstruction(from, destination, to, mint, TOKEN_PROGRAM_ID),
      );
      details['creates_token_account'] = true;
      details['rent_lamports'] = rent.toString();
    }
    instructions.push(
      createTransferCheckedInstruction(
        source,
        mint,
        destination,
        from,
        value,
        decimals,
        [],
        TOKEN_PROGRAM_ID,
      ),
    );
    details['source_token_account'] = source.toBase58();
    details['destination_token_account'] = destination.toBase58();
  }
  if (input.memo !== undefined) instructions.push(memoInstruction(input.memo, from));

  const tx = new Transaction({
    feePayer: from,
    blockhash: bh.blockhash,
    lastValidBlockHeight: Number(bh.lastValidBlockHeight),
  });
  tx.add(...instructions);
  const message = tx.compileMessage();
  const messageBytes = message.serialize();
  const size = 1 + 64 * message.header.numRequiredSignatures + messageBytes.length;
  if (size > MAX_TRANSACTION_BYTES) {
    throw new InvalidArgumentError(
      input.memo !== undefined ? 'memo' : 'value',
      `the transaction would be ${size} bytes; a Solana transaction is at most ${MAX_TRANSACTION_BYTES}`,
    );
  }
  const messageBase64 = Buffer.from(messageBytes).toString('base64');
  const fee = await feeForMessage(
    ep,
    messageBase64,
    LAMPORTS_PER_SIGNATURE * BigInt(message.header.numRequiredSignatures),
  );
  const solSpent = (input.tokenMint === undefined ? value : 0n) + fee + rent;
  checkLamports(
    balance,
    solSpent,
    rentMin,
    input.tokenMint === undefined
      ? 'the amount and fee'
      : rent > 0n
        ? "the fee and the recipient's token account rent"
        : 'the fee',
  );
  details['fee_lamports'] = fee.toString();
  details['blockhash'] = bh.blockhash;
  details['last_valid_block_height'] = bh.lastValidBlockHeight.toString();

  return {
    unsigned: {
      message: messageBase64,
      feePayer: from.toBase58(),
      blockhash: bh.blockhash,
      lastValidBlockHeight: bh.lastValidBlockHeight.toString(),
    },
    to: to.toBase58(),
    value,
    fee: fee + rent,
    inputs: [],
    expiry: { kind: 'block_height', value: bh.lastValidBlockHeight },
    details,
    // What the key can spend: its lamports above the rent-exempt minimum it must keep — all of them
    // when this transfer empties the account (allowed) — and, for a token, its token balance.
    available: {
      native: balance === solSpent || balance <= rentMin ? balance : balance - rentMin,
      ...(tokenBalance !== undefined ? { token: tokenBalance } : {}),
    },
  };
}

/** Signs the prepared message offline: the wire transaction (base64) and its first signature (base58). */
export function signSolanaTransfer(
  privateKey: Buffer,
  prepared: PreparedTransfer<SolanaUnsigned>,
): SignedTransfer {
  const message = VersionedMessage.deserialize(Buffer.from(prepared.unsigned.message, 'base64'));
  const kp = keypairOf(privateKey);
  try {
    const payer = message.staticAccountKeys[0];
    if (!payer || !payer.equals(kp.publicKey) || message.header.numRequiredSignatures !== 1) {
      throw new Error('the prepared Solana transfer is not for this key');
    }
    const tx = new VersionedTransaction(message);
    tx.sign([kp]);
    return {
      signedTx: Buffer.from(tx.serialize()).toString('base64'),
      txHash: bs58.encode(tx.signatures[0]!),
    };
  } finally {
    forget(kp);
  }
}

/** Gives the signed transaction to the node (`sendTransaction` with preflight). */
export async function broadcastSolanaTransfer(ep: ChainEndpoint, signed: SignedTransfer): Promise<void> {
  await sendTransaction(ep, signed.signedTx);
}

/** A blockhash is accepted for this many blocks after its own (MAX_PROCESSING_AGE). */
const BLOCKHASH_VALID_BLOCKS = 150n;

/**
 * Where a sent transaction is: confirmed once `finalized` (rooted, ~32 blocks: it cannot be
 * rolled back); failed once finalized with an execution error. The finalized block height is read
 * FIRST, then the status: a transaction still unknown after a finalized height past its last valid
 * block height was not in any block up to that height and can never be. Before concluding
 * `expired`, `getTransaction` at finalized (a node's status cache forgets a signature after ~300
 * slots): found → confirmed / failed by its meta; the node keeping no history (-32011) or not
 * holding every block since the transaction's blockhash (`minimumLedgerSlot`) → pending (it cannot
 * say); otherwise expired. Unknown before that height (signer sends the same bytes again).
 */
export async function solanaTransferStatus(
  ep: ChainEndpoint,
  t: { txHash: string; signedTx: string; expiry?: PreparedTransfer['expiry'] },
): Promise<TransferStatus> {
  const lastValid = t.expiry?.kind === 'block_height' ? t.expiry.value : undefined;
  const finalized = lastValid === undefined ? undefined : await blockHeight(ep, 'finalized');
  const s = await signatureStatus(ep, t.txHash);
  if (s) {
    if (s.confirmationStatus !== 'finalized') return { state: 'pending' };
    const block = Number.isSafeInteger(s.slot) ? BigInt(s.slot) : undefined;
    if (s.err !== null && s.err !== undefined) {
      return {
        state: 'failed',
        reason: `the transaction failed: ${JSON.stringify(s.err).slice(0, 300)}`,
        ...(block !== undefined ? { block } : {}),
      };
    }
    return { state: 'confirmed', ...(block !== undefined ? { block } : {}) };
  }
  if (lastValid === undefined || finalized === undefined || finalized <= lastValid)
    return { state: 'unknown' };
  const tx = await finalizedTransaction(ep, t.txHash);
  if (tx === 'no-history') return { state: 'pending' };
  if (tx !== null) {
    const extra = { block: BigInt(tx.slot), ...(tx.fee !== undefined ? { fee: tx.fee } : {}) };
    if (tx.err !== null) {
      return {
        state: 'failed',
        reason: `the transaction failed: ${JSON.stringify(tx.err).slice(0, 300)}`,
        ...extra,
      };
    }
    return { state: 'confirmed', ...extra };
  }
  // Not found: conclusive only when the node holds every block it could be in (from its blockhash's on).
  const lowest = await lowestBlockHeight(ep);
  if (lowest === undefined || lowest > lastValid - BLOCKHASH_VALID_BLOCKS) return { state: 'pending' };
  return {
    state: 'expired',
    reason: `its blockhash expired: finalized block height ${finalized} is past its last valid block height ${lastValid}, and the node's ledger (from block ${lowest}) does not hold it`,
  };
}

/** Solana transfers: SOL and SPL Token (see TransferOps). */
export const solanaTransfers: TransferOps<SolanaUnsigned> = {
  parse: parseSolanaTransfer,
  prepare: prepareSolanaTransfer,
  sign: (privateKey, prepared) => signSolanaTransfer(privateKey, prepared),
  broadcast: broadcastSolanaTransfer,
  status: solanaTransferStatus,
};
