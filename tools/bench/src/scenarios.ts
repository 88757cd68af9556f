import { type LoadRequest } from './load.js';
import { type MixedShape, mixedPick } from './scenario-fns.js';
import {
  type BenchAgent,
  agentToken as exchange,
  benchUser,
  createVault,
  eachLimited,
  expectValue,
  grant,
  registerAgent,
  storeSecret,
  value,
} from './setup.js';

/** A set-up scenario: the request of the i-th iteration, and what it is. */
export interface Scenario {
  name: string;
  description: string;
  request(i: number): LoadRequest;
}

/** What every scenario is set up from (the command's options). */
export interface ScenarioOptions {
  paths: number;
  valueBytes: number;
  concurrency: number;
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

/** Every scenario by name, in the order a default run measures them. */
export const SCENARIOS: Record<string, (baseUrl: string, opts: ScenarioOptions) => Promise<Scenario>> = {
  'agent-read': agentRead,
  'user-write': userWrite,
  'agent-token': agentTokenExchange,
  mixed,
};
