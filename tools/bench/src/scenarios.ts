import { Wallet, getAddress } from 'ethers';
import {
  BENCH_CHAIN,
  SENT_STATUSES,
  TRANSFER,
  acceptSentTransfer,
  acceptSignedIntent,
  signIntentBody,
  signedTxMismatches,
  transferBody,
} from './evm-fns.js';
import { type BodyCheck, type LoadRequest } from './load.js';
import { type MixedShape, type ScenarioCheck, mixedPick, transferCheck } from './scenario-fns.js';
import {
  type BenchAgent,
  agentToken as exchange,
  benchUser,
  createSigningKey,
  createVault,
  eachLimited,
  expectValue,
  fund,
  grant,
  jsonRpc,
  minedNonces,
  must,
  registerAgent,
  settlePool,
  storeSecret,
  value,
} from './setup.js';

/** A set-up scenario: the request of the i-th iteration, and what it is. */
export interface Scenario {
  name: string;
  description: string;
  /** The i-th request of a run, asked by connection `loop` (whose requests go one after another). */
  request(i: number, loop: number): LoadRequest;
  /**
   * Judges the body of each 2xx answer (load.ts `BodyCheck`): an answer it refuses is a failed
   * request, not a success (e.g. a 201 for a transaction whose broadcast failed).
   */
  acceptBody?: BodyCheck;
  /**
   * A check after the measured run, given how many requests of the warm-up and the run were
   * answered 2xx and accepted by `acceptBody`; what it found goes into the results (e.g. that every
   * broadcast transfer was mined). An inconsistent check fails the scenario and the run.
   */
  check?(answered: number): Promise<ScenarioCheck>;
}

/** What every scenario is set up from (the command's options). */
export interface ScenarioOptions {
  paths: number;
  valueBytes: number;
  concurrency: number;
  /** JSON-RPC URL of the anvil behind the mesh's chain `anvil` (the signing scenarios fund keys there). */
  anvilUrl?: string;
}

/** Parallel set-up calls: enough to hide latency, few enough not to matter (set-up is not timed). */
const SETUP_PARALLEL = 8;

const JSON_HEADERS = { accept: 'application/json', 'content-type': 'application/json' };

/** Request bodies of a PUT of a new random value; a few, reused in turn. */
function putBodies(valueBytes: number): Buffer[] {
  return Array.from({ length: 64 }, () =>
    Buffer.from(JSON.stringify({ type: 'api_key', value: value(valueBytes) })),
  );
}

/**
 * `agent-read`: an agent with a read policy on `bench/*` reads `paths` secrets of `valueBytes` in
 * turn with its own token: gateway → vault-crypto → policy decision → audited read → decrypt.
 */
export async function agentRead(baseUrl: string, opts: ScenarioOptions): Promise<Scenario> {
  const userToken = await benchUser(baseUrl);
  const vaultId = await createVault(baseUrl, userToken, 'bench-read');
  const values = Array.from({ length: opts.paths }, () => value(opts.valueBytes));
  await eachLimited([...values.keys()], SETUP_PARALLEL, (k) =>
    storeSecret(baseUrl, userToken, vaultId, `bench/s${k}`, values[k]!),
  );
  const agent = await registerAgent(baseUrl, userToken);
  await grant(baseUrl, userToken, vaultId, agent.id, 'bench/*', ['read']);
  // The token is minted after the grant, so it carries the scopes the grant gives.
  const agentToken = await exchange(baseUrl, agent);
  await eachLimited([...values.keys()], SETUP_PARALLEL, (k) =>
    expectValue(baseUrl, agentToken, vaultId, `bench/s${k}`, values[k]!),
  );
  const headers = { authorization: `Bearer ${agentToken}`, accept: 'application/json' };
  const paths = Array.from({ length: opts.paths }, (_, k) => `/v1/vaults/${vaultId}/secrets/bench/s${k}`);
  return {
    name: 'agent-read',
    description: `agent reads one of ${opts.paths} secrets (${opts.valueBytes} B) under a read policy`,
    request: (i) => ({ method: 'GET', path: paths[i % paths.length]!, headers }),
  };
}

/** `user-write`: the vault's owner stores a new version of one of `paths` secrets of `valueBytes`. */
export async function userWrite(baseUrl: string, opts: ScenarioOptions): Promise<Scenario> {
  const userToken = await benchUser(baseUrl);
  const vaultId = await createVault(baseUrl, userToken, 'bench-write');
  const keys = Array.from({ length: opts.paths }, (_, k) => k);
  // Every path exists before the run, so the run stores versions rather than new paths (tier caps).
  await eachLimited(keys, SETUP_PARALLEL, (k) =>
    storeSecret(baseUrl, userToken, vaultId, `bench/w${k}`, value(opts.valueBytes)),
  );
  const paths = keys.map((k) => `/v1/vaults/${vaultId}/secrets/bench/w${k}`);
  const bodies = putBodies(opts.valueBytes);
  const headers = { authorization: `Bearer ${userToken}`, ...JSON_HEADERS };
  return {
    name: 'user-write',
    description: `user stores a new version of one of ${opts.paths} secrets (${opts.valueBytes} B)`,
    request: (i) => ({
      method: 'PUT',
      path: paths[i % paths.length]!,
      headers,
      body: bodies[i % bodies.length]!,
    }),
  };
}

/**
 * `agent-token`: agents exchange their API key for a token (`POST /v1/auth/agent-token`), as each
 * agent does at start and whenever its token expires. One org with as many agents as connections,
 * each with a read grant (so the exchange looks its grants up, as for a real agent), request i
 * exchanging the key of agent i mod agents: the requests in flight at any moment are of different
 * agents, as in a fleet (identity caches an agent's grant scopes, and one agent's exchanges in a
 * burst would mostly measure that cache). Identity throttles no key.
 */
export async function agentTokenExchange(baseUrl: string, opts: ScenarioOptions): Promise<Scenario> {
  const userToken = await benchUser(baseUrl);
  const vaultId = await createVault(baseUrl, userToken, 'bench-token');
  const agents: BenchAgent[] = [];
  await eachLimited(
    Array.from({ length: opts.concurrency }, (_, k) => k),
    SETUP_PARALLEL,
    async () => {
      const agent = await registerAgent(baseUrl, userToken);
      await grant(baseUrl, userToken, vaultId, agent.id, 'bench/*', ['read']);
      await exchange(baseUrl, agent);
      agents.push(agent);
    },
  );
  const bodies = agents.map((a) => Buffer.from(JSON.stringify({ agent_id: a.id, api_key: a.apiKey })));
  return {
    name: 'agent-token',
    description: `one of ${agents.length} agents exchanges its API key for a token`,
    request: (i) => ({
      method: 'POST',
      path: '/v1/auth/agent-token',
      headers: JSON_HEADERS,
      body: bodies[i % bodies.length]!,
    }),
  };
}

/** The shape of `mixed` (issue 14): 4 orgs × 3 agents, 64 paths per org's vault, 10 % writes. */
export const MIXED: MixedShape = { orgs: 4, agentsPerOrg: 3, paths: 64, writeEvery: 10 };

/**
 * `mixed`: four orgs (a sign-up each), each with one vault of 64 secrets `bench/m0…` and three agents
 * holding a read+write grant on `bench/*`; request i (see mixedPick) is a read (9 in 10) or a PUT
 * of a new version (1 in 10) of one path by one agent of one org, with that agent's token.
 */
export async function mixed(baseUrl: string, opts: ScenarioOptions): Promise<Scenario> {
  const orgs = await Promise.all(
    Array.from({ length: MIXED.orgs }, async () => {
      const userToken = await benchUser(baseUrl);
      const vaultId = await createVault(baseUrl, userToken, 'bench-mixed');
      const values = Array.from({ length: MIXED.paths }, () => value(opts.valueBytes));
      await eachLimited([...values.keys()], SETUP_PARALLEL / 2, (k) =>
        storeSecret(baseUrl, userToken, vaultId, `bench/m${k}`, values[k]!),
      );
      const tokens: string[] = [];
      for (let a = 0; a < MIXED.agentsPerOrg; a++) {
        const agent = await registerAgent(baseUrl, userToken);
        await grant(baseUrl, userToken, vaultId, agent.id, 'bench/*', ['read', 'write']);
        const token = await exchange(baseUrl, agent);
        // Each agent reads one of the values back before the run: the grant and token work.
        const k = (a * 17) % MIXED.paths;
        await expectValue(baseUrl, token, vaultId, `bench/m${k}`, values[k]!);
        tokens.push(token);
      }
      return {
        paths: values.map((_, k) => `/v1/vaults/${vaultId}/secrets/bench/m${k}`),
        reads: tokens.map((t) => ({ authorization: `Bearer ${t}`, accept: 'application/json' })),
        writes: tokens.map((t) => ({ authorization: `Bearer ${t}`, ...JSON_HEADERS })),
      };
    }),
  );
  const bodies = putBodies(opts.valueBytes);
  return {
    name: 'mixed',
    description:
      `${MIXED.orgs} orgs × ${MIXED.agentsPerOrg} agents with read+write grants, ${MIXED.paths} secrets ` +
      `(${opts.valueBytes} B) per org; 1 request in ${MIXED.writeEvery} a new version, the rest reads`,
    request: (i) => {
      const p = mixedPick(i, MIXED);
      const org = orgs[p.org]!;
      const path = org.paths[p.path]!;
      return p.write
        ? { method: 'PUT', path, headers: org.writes[p.agent]!, body: bodies[i % bodies.length]! }
        : { method: 'GET', path, headers: org.reads[p.agent]! };
    },
  };
}

/** An agent that may sign: Intents on, a server-custody key on the bench chain, a token. */
interface SigningAgent {
  id: string;
  token: string;
  address: string;
}

/**
 * `count` agents of the user's org created with `intents_api_enabled: true`, each given a signing
 * key on the bench chain by the owner, then exchanging its API key (the token carries the flag).
 */
async function signingFleet(baseUrl: string, userToken: string, count: number): Promise<SigningAgent[]> {
  const fleet: SigningAgent[] = [];
  await eachLimited(
    Array.from({ length: count }, (_, k) => k),
    SETUP_PARALLEL,
    async () => {
      const agent = await registerAgent(baseUrl, userToken, { intents_api_enabled: true });
      const address = await createSigningKey(baseUrl, userToken, agent.id, BENCH_CHAIN.name);
      fleet.push({ id: agent.id, token: await exchange(baseUrl, agent), address });
    },
  );
  return fleet;
}

/**
 * `sign-intent`: agents sign an EIP-1559 transfer without broadcasting it (`POST
 * /v1/agents/{id}/sign`, `intent_type: "transaction"`), every field given (to, value, nonce, gas
 * limit, both fees, chain `anvil`) so signer asks the chain nothing. As many agents as connections,
 * each with its own key; connection k is agent k, signing its next nonce each time (a different
 * transaction every time) as soon as the last one was answered. Set-up checks each agent's first
 * signature with ethers: the signed transaction is the one asked for, from the key's address, and
 * its hash is the answer's.
 */
export async function signIntent(baseUrl: string, opts: ScenarioOptions): Promise<Scenario> {
  const userToken = await benchUser(baseUrl);
  const fleet = await signingFleet(baseUrl, userToken, opts.concurrency);
  const to = Wallet.createRandom().address;
  await eachLimited(fleet, SETUP_PARALLEL, async (a) => {
    const signed = await must(baseUrl, 'sign intent', 200, 'POST', `/v1/agents/${a.id}/sign`, {
      token: a.token,
      body: signIntentBody(to, 0),
    });
    const raw = signed['signed_tx'];
    const hash = signed['tx_hash'];
    if (typeof raw !== 'string' || typeof hash !== 'string')
      throw new Error('sign intent: no signed_tx and tx_hash in the answer');
    const wrong = signedTxMismatches(raw, { from: a.address, to, nonce: 0, txHash: hash });
    if (wrong.length > 0) throw new Error(`sign intent: the signed transaction differs: ${wrong.join('; ')}`);
  });
  const paths = fleet.map((a) => `/v1/agents/${a.id}/sign`);
  // Set-up signed nonce 0 of each.
  const nonces = fleet.map(() => 1);
  const headers = fleet.map((a) => ({
    authorization: `Bearer ${a.token}`,
    accept: 'application/json',
    'content-type': 'application/json',
  }));
  return {
    name: 'sign-intent',
    description:
      `one of ${fleet.length} agents signs an EIP-1559 transfer on ${BENCH_CHAIN.name} (sign only, ` +
      `every field given: the chain is not asked)`,
    request: (_i, loop) => {
      const member = loop % fleet.length;
      return {
        method: 'POST',
        path: paths[member]!,
        headers: headers[member]!,
        body: Buffer.from(JSON.stringify(signIntentBody(to, nonces[member]!++))),
      };
    },
    // A 200 counts when it carries the signed transaction and its hash.
    acceptBody: acceptSignedIntent,
  };
}

/**
 * `eth-transfer`: agents send value on the mesh's anvil (`POST /v1/agents/{id}/transactions`, a
 * transfer of 10^12 wei with nonce, gas and fees left to signer), measured until the 201 that
 * follows the broadcast. As many agents as connections, each key funded with `anvil_setBalance`;
 * connection k is agent k, sending its next transfer when the last one was answered (as an agent
 * does that waits for each broadcast). Set-up sends one transfer per agent and checks it
 * mined and reached the recipient. A 201 counts as a success only when its body says the transfer
 * was sent (status `broadcast` or `confirmed`, with its hash); any other is a failed request. After
 * the run, `check` lets anvil mine what it holds, then compares the keys' mined nonces and the
 * recipient's balance with the number of transfers answered as sent: a difference fails the
 * scenario and the run.
 */
export async function ethTransfer(baseUrl: string, opts: ScenarioOptions): Promise<Scenario> {
  const anvilUrl = opts.anvilUrl;
  if (!anvilUrl) throw new Error('eth-transfer needs the mesh’s anvil (BENCH_ANVIL_URL with BENCH_URL)');
  const userToken = await benchUser(baseUrl);
  const fleet = await signingFleet(baseUrl, userToken, opts.concurrency);
  await eachLimited(fleet, SETUP_PARALLEL, (a) => fund(anvilUrl, a.address, 10n ** 24n));
  const to = Wallet.createRandom().address;
  const body = Buffer.from(JSON.stringify(transferBody(to, TRANSFER.valueWei)));
  const balanceOf = async () => BigInt(await jsonRpc<string>(anvilUrl, 'eth_getBalance', [to, 'latest']));
  await eachLimited(fleet, SETUP_PARALLEL, async (a) => {
    const sent = await must(baseUrl, 'send transfer', 201, 'POST', `/v1/agents/${a.id}/transactions`, {
      token: a.token,
      body: transferBody(to, TRANSFER.valueWei),
    });
    if (typeof sent['tx_hash'] !== 'string') throw new Error('send transfer: no tx_hash in the answer');
    if (!SENT_STATUSES.includes(String(sent['status'])))
      throw new Error(`send transfer: answered 201 with status ${String(sent['status'])}`);
  });
  const probeNonces = await minedNonces(
    anvilUrl,
    fleet.map((a) => a.address),
  );
  const probeBalance = await balanceOf();
  if (probeNonces.some((n) => n !== 1) || probeBalance !== BigInt(fleet.length) * TRANSFER.valueWei) {
    throw new Error(
      `send transfer: after one transfer per agent the nonces are ${JSON.stringify(probeNonces)} and ` +
        `the recipient holds ${probeBalance} wei`,
    );
  }
  const paths = fleet.map((a) => `/v1/agents/${a.id}/transactions`);
  const headers = fleet.map((a) => ({
    authorization: `Bearer ${a.token}`,
    accept: 'application/json',
    'content-type': 'application/json',
  }));
  // 2xx answers refused for their body, by reason, over the warm-up and the run.
  const refusals = new Map<string, number>();
  return {
    name: 'eth-transfer',
    description:
      `one of ${fleet.length} agents sends ${TRANSFER.valueWei} wei on ${BENCH_CHAIN.name} ` +
      `(signer fills nonce, gas and fees, signs and broadcasts; measured to the 201)`,
    request: (_i, loop) => {
      const member = loop % fleet.length;
      return { method: 'POST', path: paths[member]!, headers: headers[member]!, body };
    },
    // A 201 counts only when the transfer was sent: signer answers 201 with status `failed` when
    // the broadcast failed (nonce given back) and `signed` when it cannot tell whether the node
    // took it (its watcher sends it again); both are failed requests. The reasons are tallied for
    // the check.
    acceptBody: (answer) => {
      const verdict = acceptSentTransfer(answer);
      if (verdict !== true) refusals.set(verdict, (refusals.get(verdict) ?? 0) + 1);
      return verdict;
    },
    check: async (answered) => {
      // Anvil answers before it mines: let it mine what it holds first (at most 30 s).
      const poolEmptied = await settlePool(anvilUrl);
      const nonces = await minedNonces(
        anvilUrl,
        fleet.map((a) => a.address),
      );
      const mined = nonces.reduce((x, y) => x + y, 0) - fleet.length;
      const received = Number((await balanceOf()) / TRANSFER.valueWei - BigInt(fleet.length));
      const unsure = refusals.get('status signed') ?? 0;
      return {
        ...transferCheck(answered, mined, received, unsure),
        answered_sent: answered,
        answered_signed_unsent: unsure,
        refused_answers: Object.fromEntries(refusals),
        mined_transfers: mined,
        recipient_received_transfers: received,
        pool_emptied: poolEmptied,
        recipient: getAddress(to),
      };
    },
  };
}

/** Every scenario by name, in the order a default run measures them. */
export const SCENARIOS: Record<string, (baseUrl: string, opts: ScenarioOptions) => Promise<Scenario>> = {
  'agent-read': agentRead,
  'user-write': userWrite,
  'agent-token': agentTokenExchange,
  mixed,
  'sign-intent': signIntent,
  'eth-transfer': ethTransfer,
};
