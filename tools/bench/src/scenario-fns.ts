/** What the i-th request of the `mixed` scenario does. */
export interface MixedPick {
  org: number;
  agent: number;
  path: number;
  write: boolean;
}

/** The shape of the `mixed` scenario: how many of each, and one write in `writeEvery` requests. */
export interface MixedShape {
  orgs: number;
  agentsPerOrg: number;
  paths: number;
  writeEvery: number;
}

/**
 * The i-th request of `mixed`: request i is a write when i mod `writeEvery` is the last of its block,
 * a read otherwise; the block j = ⌊i / writeEvery⌋ picks the org (j mod orgs), then the org's agent
 * (⌊j / orgs⌋ mod agentsPerOrg), then the path (⌊j / (orgs × agentsPerOrg)⌋ mod paths). Writes are
 * thus exactly one in `writeEvery`, evenly spread in time, and over orgs × agents × paths × writeEvery
 * requests every (org, agent, path) is read writeEvery − 1 times and written once. Picking the
 * org from i itself would tie the operation to the org (with 10 and 4, every write would land on
 * the odd orgs).
 */
export function mixedPick(i: number, shape: MixedShape): MixedPick {
  const { orgs, agentsPerOrg, paths, writeEvery } = shape;
  const j = Math.floor(i / writeEvery);
  return {
    org: j % orgs,
    agent: Math.floor(j / orgs) % agentsPerOrg,
    path: Math.floor(j / (orgs * agentsPerOrg)) % paths,
    write: i % writeEvery === writeEvery - 1,
  };
}

/**
 * BENCH_SERVICE_ENV, "K=V,K=V": variables for every service the benchmark starts (to measure a lever
 * with it off). Names must look like environment variables; anything else is refused.
 */
export function serviceEnvOf(raw: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of (raw ?? '')
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean)) {
    const eq = part.indexOf('=');
    const name = eq > 0 ? part.slice(0, eq) : '';
    if (!/^[A-Z][A-Z0-9_]*$/.test(name)) throw new Error(`BENCH_SERVICE_ENV: "${part}" is not NAME=value`);
    out[name] = part.slice(eq + 1);
  }
  return out;
}

/**
 * The bare ceilings a scenario is reported against besides pg point-select: the work underneath it
 * with nothing in front, measured in the same run (issue 17: a signed intent per ethers signing
 * the same transaction, a broadcast transfer per raw `eth_sendRawTransaction` to the same anvil).
 */
export const SCENARIO_CEILINGS: Readonly<Record<string, readonly string[]>> = {
  'sign-intent': ['ethers_sign_eip1559_1core', 'ethers_sign_eip1559_all_cores'],
  'eth-transfer': ['anvil_send_raw_transaction'],
};

/**
 * A scenario's rate ÷ each of its own ceilings' (three decimals), by ceiling name; null for a
 * ceiling that was not measured (or measured nothing). Empty for a scenario without any.
 */
export function ceilingRatios(
  scenario: string,
  rps: number,
  ceilings: Readonly<Record<string, { ops_per_s: number } | undefined>>,
): Record<string, number | null> {
  const out: Record<string, number | null> = {};
  for (const name of SCENARIO_CEILINGS[scenario] ?? []) {
    const c = ceilings[name]?.ops_per_s ?? 0;
    out[name] = c > 0 ? Math.round((rps / c) * 1000) / 1000 : null;
  }
  return out;
}

/**
 * What a scenario's check after the run found (goes into the results as `check`). `consistent:
 * false` fails the scenario: its failures count the check's `discrepancies` and the run exits
 * non-zero.
 */
export interface ScenarioCheck {
  consistent: boolean;
  /** How many answers the check could not account for (0 when consistent). */
  discrepancies: number;
  [detail: string]: unknown;
}

/**
 * `eth-transfer`'s check: every transfer answered as sent (`answered`) was mined once (`mined`, from
 * the keys' nonces) and reached the recipient (`received`, from its balance). `unsure` transfers
 * were answered 201 with status `signed` (signer could not tell whether the node took them; its
 * watcher sends them again): each may or may not be mined, so `mined` and `received` may exceed
 * `answered` by up to `unsure` (those answers already count as failed requests). The discrepancy
 * is the larger distance of the two counts from that range.
 */
export function transferCheck(
  answered: number,
  mined: number,
  received: number,
  unsure = 0,
): Pick<ScenarioCheck, 'consistent' | 'discrepancies'> {
  const off = (n: number) =>
    n < answered ? answered - n : n > answered + unsure ? n - answered - unsure : 0;
  const discrepancies = Math.max(off(mined), off(received));
  return { consistent: discrepancies === 0, discrepancies };
}

/**
 * The failures a check adds to its scenario: none when consistent, else its discrepancies and at
 * least one (a check that could not look, or that found the run wrong without a count, fails too).
 */
export function checkFailures(check: ScenarioCheck | undefined): number {
  if (!check || check.consistent === true) return 0;
  const d = check.discrepancies;
  return Number.isFinite(d) && d > 0 ? Math.round(d) : 1;
}
