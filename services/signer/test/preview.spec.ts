import http from 'node:http';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { AbiCoder, Interface, JsonRpcProvider, Wallet, parseEther } from 'ethers';
import { EvmRpcPool } from '../src/evm/evm-rpc';
import { JsonRpcPreview, buildPreview, type PreviewInput } from '../src/preview';

// The approver's preview against a real anvil: eth_call and debug_traceCall (prestateTracer in
// diffMode) for a native transfer and for a contract that always reverts, the token probes against
// deployed contracts, and a node (through a proxy) that lacks debug_traceCall or never answers.

// eslint-disable-next-line @typescript-eslint/no-require-imports
const { startMeshAnvil } = require(path.join(__dirname, '../../../tools/mesh/dist/anvil.js')) as {
  startMeshAnvil(): Promise<{ url: string; stop(): Promise<void> }>;
};

/** Anvil's first dev account (unlocked: eth_sendTransaction deploys from it). */
const DEV = '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266';
const ANVIL = { name: 'anvil', chainId: 31337n, family: 'evm', nativeSymbol: 'ETH', decimals: 18 };

const hex = (bytes: number[]) => bytes.map((b) => b.toString(16).padStart(2, '0')).join('');

/**
 * Init code that deploys `runtime`: CODECOPY the bytes after this 12-byte header into memory and
 * RETURN them.
 *   PUSH1 len  PUSH1 0x0c  PUSH1 0  CODECOPY   (60 len 60 0c 60 00 39)
 *   PUSH1 len  PUSH1 0     RETURN              (60 len 60 00 f3)
 */
function initCode(runtime: string): string {
  const len = runtime.length / 2;
  return '0x' + hex([0x60, len, 0x60, 0x0c, 0x60, 0x00, 0x39, 0x60, len, 0x60, 0x00, 0xf3]) + runtime;
}

/**
 * Runtime that reverts with Error("nope") whatever it is called with: it CODECOPYs its own trailing
 * 100 bytes (the ABI encoding of Error("nope"): selector 0x08c379a0, offset 0x20, length 4, "nope"
 * padded) into memory and REVERTs with them.
 *   PUSH1 100  PUSH1 0x0c  PUSH1 0  CODECOPY   (60 64 60 0c 60 00 39)
 *   PUSH1 100  PUSH1 0     REVERT              (60 64 60 00 fd)
 *   <100 bytes of Error("nope")>
 */
function alwaysRevertsRuntime(): string {
  const payload = '08c379a0' + AbiCoder.defaultAbiCoder().encode(['string'], ['nope']).slice(2);
  expect(payload.length / 2).toBe(100);
  return hex([0x60, 0x64, 0x60, 0x0c, 0x60, 0x00, 0x39, 0x60, 0x64, 0x60, 0x00, 0xfd]) + payload;
}

/**
 * Runtime that answers the 32-byte word `n` to any call (so `supportsInterface` is true when n = 1,
 * and `decimals()` is n):
 *   PUSH1 n  PUSH1 0  MSTORE  PUSH1 32  PUSH1 0  RETURN   (60 n 60 00 52 60 20 60 00 f3)
 */
function answersWordRuntime(n: number): string {
  return hex([0x60, n, 0x60, 0x00, 0x52, 0x60, 0x20, 0x60, 0x00, 0xf3]);
}

type Mode = 'pass' | 'hang' | { error: { code: number; message: string } };

describe('preview against anvil', () => {
  let anvil: { url: string; stop(): Promise<void> };
  let chain: JsonRpcProvider;
  let preview: JsonRpcPreview;
  let proxy: http.Server;
  let proxied: JsonRpcPreview;
  const modes = new Map<string, Mode>();
  let reverter: string;
  let nft: string; // answers 1 to everything: ERC-165 says ERC-721
  let sixDecimals: string; // answers 6 to everything: ERC-165 says no, decimals() is 6

  const deploy = async (runtime: string): Promise<string> => {
    const hash = (await chain.send('eth_sendTransaction', [
      { from: DEV, data: initCode(runtime) },
    ])) as string;
    const receipt = (await chain.send('eth_getTransactionReceipt', [hash])) as { contractAddress: string };
    expect(await chain.getCode(receipt.contractAddress)).toBe('0x' + runtime);
    return receipt.contractAddress;
  };

  beforeAll(async () => {
    anvil = await startMeshAnvil();
    chain = new JsonRpcProvider(anvil.url, 31337, { staticNetwork: true });
    preview = new JsonRpcPreview(anvil.url, 31337n, 5000);
    reverter = await deploy(alwaysRevertsRuntime());
    nft = await deploy(answersWordRuntime(1));
    sixDecimals = await deploy(answersWordRuntime(6));
    proxy = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        const payload = JSON.parse(body) as { id: number; method: string };
        const mode = modes.get(payload.method) ?? 'pass';
        if (mode === 'hang') return;
        if (typeof mode === 'object') {
          res.setHeader('content-type', 'application/json');
          res.end(JSON.stringify({ jsonrpc: '2.0', id: payload.id, error: mode.error }));
          return;
        }
        void fetch(anvil.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body })
          .then((r) => r.text())
          .then((text) => {
            res.setHeader('content-type', 'application/json');
            res.end(text);
          });
      });
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
    proxied = new JsonRpcPreview(`http://127.0.0.1:${(proxy.address() as AddressInfo).port}`, 31337n, 5000);
  }, 60_000);

  afterAll(async () => {
    preview?.destroy();
    proxied?.destroy();
    chain?.destroy();
    proxy?.closeAllConnections();
    await new Promise((r) => proxy?.close(r));
    await anvil?.stop();
  });
  afterEach(() => modes.clear());

  const funded = async () => {
    const w = Wallet.createRandom();
    await chain.send('anvil_setBalance', [w.address, '0x56bc75e2d63100000']); // 100 ETH
    return w.address;
  };
  const input = (o: Partial<PreviewInput>): PreviewInput => ({
    chain: ANVIL,
    from: DEV,
    to: DEV,
    valueWei: 0n,
    data: '0x',
    tier: 1,
    ...o,
  });

  it('a native transfer: eth_call succeeds and debug_traceCall gives both balance changes', async () => {
    const from = await funded();
    const to = Wallet.createRandom().address;
    const p = await buildPreview(input({ from, to, valueWei: parseEther('1') }), preview);
    expect(p).toMatchObject({ value: '1', value_wei: '1000000000000000000', call: null, flags: [] });
    expect(p.simulation).toEqual({
      ok: true,
      return_data: '0x',
      trace: 'debug_traceCall',
      balance_changes: [
        {
          address: from,
          before_wei: '100000000000000000000',
          after_wei: '99000000000000000000',
          delta_wei: '-1000000000000000000',
        },
        { address: to, before_wei: '0', after_wei: '1000000000000000000', delta_wei: '1000000000000000000' },
      ],
    });
    // What approvals stores as a protobuf Struct: plain JSON (no bigint, no undefined).
    expect(JSON.parse(JSON.stringify(p))).toStrictEqual(p);
    // A preview simulates: nothing was sent.
    expect(await chain.getBalance(to)).toBe(0n);
  });

  it('a call that reverts: the decoded reason, no balance change, simulation_reverted', async () => {
    const from = await funded();
    const p = await buildPreview(input({ from, to: reverter, data: '0xdeadbeef' }), preview);
    expect(p.simulation).toMatchObject({
      ok: false,
      revert_reason: 'nope',
      trace: 'debug_traceCall',
      balance_changes: [],
    });
    expect((p.simulation as { return_data: string }).return_data.slice(0, 10)).toBe('0x08c379a0');
    expect(p.call).toMatchObject({ selector: '0xdeadbeef', name: null, contract: reverter });
    expect(p.flags).toEqual([{ code: 'simulation_reverted', detail: expect.stringContaining('nope') }]);
    expect(JSON.parse(JSON.stringify(p))).toStrictEqual(p);
  });

  it('transferFrom on a contract that says it is ERC-721 is an NFT transfer', async () => {
    const to = Wallet.createRandom().address;
    const data = new Interface(['function transferFrom(address,address,uint256)']).encodeFunctionData(
      'transferFrom',
      [DEV, to, 77n],
    );
    const p = await buildPreview(input({ to: nft, data }), preview);
    expect(p.call).toMatchObject({ name: 'transferFrom', args: { from: DEV, to, tokenId: '77' } });
    expect(p.token_transfer).toMatchObject({
      kind: 'erc721_transfer',
      recipient: to,
      token_id: '77',
      token: nft,
    });
    const asErc20 = await buildPreview(input({ to: sixDecimals, data }), preview);
    expect(asErc20.token_transfer).toMatchObject({
      kind: 'erc20_transfer_from',
      amount_raw: '77',
      decimals: 6,
    });
  });

  it('an ERC-20 transfer: decimals() from the contract give the amount in major units', async () => {
    const recipient = Wallet.createRandom().address;
    const data = new Interface(['function transfer(address,uint256)']).encodeFunctionData('transfer', [
      recipient,
      2_500_000n,
    ]);
    const p = await buildPreview(
      input({
        to: sixDecimals,
        data,
        summary: { title: 'pay', body: '', fields: [{ label: 'Amount', value: '2.5 USDC' }] },
      }),
      preview,
    );
    expect(p.token_transfer).toEqual({
      token: sixDecimals,
      recipient,
      amount_raw: '2500000',
      kind: 'erc20_transfer',
      decimals: 6,
      amount: '2.5',
    });
    expect(p.simulation).toMatchObject({ ok: true, trace: 'debug_traceCall' });
    expect(p.flags).toEqual([]);
  });

  it('a node without debug_traceCall: trace unsupported, balance changes null, eth_call still shown', async () => {
    modes.set('debug_traceCall', {
      error: { code: -32601, message: 'the method debug_traceCall does not exist/is not available' },
    });
    const p = await buildPreview(input({ to: Wallet.createRandom().address, valueWei: 1n }), proxied);
    expect(p.simulation).toEqual({
      ok: true,
      return_data: '0x',
      trace: 'unsupported',
      balance_changes: null,
    });
  });

  it("signer's own EvmRpc (eth_call only) serves the preview without balance changes", async () => {
    const pool = new EvmRpcPool(5000);
    try {
      const rpc = pool.forChain({ name: 'anvil', rpcUrl: anvil.url, chainId: 31337n });
      const p = await buildPreview(input({ to: reverter }), rpc);
      expect(p.simulation).toEqual(
        expect.objectContaining({
          ok: false,
          revert_reason: 'nope',
          trace: 'unsupported',
          balance_changes: null,
        }),
      );
    } finally {
      pool.close();
    }
  });

  it('a node that never answers: each call times out and the preview is still given', async () => {
    modes.set('eth_call', 'hang');
    modes.set('debug_traceCall', 'hang');
    const p = await buildPreview(input({ to: Wallet.createRandom().address, valueWei: 1n }), proxied, {
      timeoutMs: 300,
    });
    expect(p).toMatchObject({ value_wei: '1', flags: [] });
    expect(p.simulation).toEqual({
      ok: false,
      error: expect.stringMatching(/eth_call timed out/),
      trace: 'debug_traceCall',
      trace_error: expect.stringMatching(/debug_traceCall timed out/),
      balance_changes: null,
    });
  });

  it('a node error on eth_call is a failed simulation, not a revert', async () => {
    modes.set('eth_call', { error: { code: -32005, message: 'rate limited' } });
    const p = await buildPreview(input({ to: Wallet.createRandom().address }), proxied);
    expect(p.simulation).toMatchObject({ ok: false, error: expect.stringContaining('rate limited') });
    expect(p.flags).toEqual([]);
  });
});
