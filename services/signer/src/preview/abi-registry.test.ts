import { Interface, MaxUint256, Wallet } from 'ethers';
import { decodeCall, registerAbi } from './abi-registry';

// Call data is built with ethers' own encoder from the standards' signatures, so these tests check
// the registry's readings against an independent encoding, not against themselves.
const erc20 = new Interface([
  'function transfer(address to, uint256 amount)',
  'function approve(address spender, uint256 amount)',
  'function transferFrom(address from, address to, uint256 amount)',
]);
const erc721 = new Interface([
  'function safeTransferFrom(address from, address to, uint256 tokenId)',
  'function safeTransferFrom(address from, address to, uint256 tokenId, bytes data)',
  'function setApprovalForAll(address operator, bool approved)',
]);
const weth = new Interface(['function deposit() payable', 'function withdraw(uint256 wad)']);

const A = Wallet.createRandom().address;
const B = Wallet.createRandom().address;

describe('decodeCall', () => {
  const cases: {
    name: string;
    data: string;
    opts?: { standard?: 'erc721' };
    expected: {
      selector: string;
      name: string | null;
      signature: string | null;
      kind?: string;
      args: object;
    };
  }[] = [
    {
      name: 'ERC-20 transfer',
      data: erc20.encodeFunctionData('transfer', [A, 1234n]),
      expected: {
        selector: '0xa9059cbb',
        name: 'transfer',
        signature: 'transfer(address,uint256)',
        kind: 'erc20_transfer',
        args: { to: A, amount: '1234' },
      },
    },
    {
      name: 'ERC-20 approve of MaxUint256',
      data: erc20.encodeFunctionData('approve', [A, MaxUint256]),
      expected: {
        selector: '0x095ea7b3',
        name: 'approve',
        signature: 'approve(address,uint256)',
        kind: 'erc20_approve',
        args: { spender: A, amount: MaxUint256.toString() },
      },
    },
    {
      name: 'transferFrom read as ERC-20 by default',
      data: erc20.encodeFunctionData('transferFrom', [A, B, 5n]),
      expected: {
        selector: '0x23b872dd',
        name: 'transferFrom',
        signature: 'transferFrom(address,address,uint256)',
        kind: 'erc20_transfer_from',
        args: { from: A, to: B, amount: '5' },
      },
    },
    {
      name: 'transferFrom read as ERC-721 when the contract is one',
      data: erc20.encodeFunctionData('transferFrom', [A, B, 5n]),
      opts: { standard: 'erc721' },
      expected: {
        selector: '0x23b872dd',
        name: 'transferFrom',
        signature: 'transferFrom(address,address,uint256)',
        kind: 'erc721_transfer',
        args: { from: A, to: B, tokenId: '5' },
      },
    },
    {
      name: 'ERC-721 safeTransferFrom (3 arguments)',
      data: erc721.encodeFunctionData('safeTransferFrom(address,address,uint256)', [A, B, 7n]),
      expected: {
        selector: '0x42842e0e',
        name: 'safeTransferFrom',
        signature: 'safeTransferFrom(address,address,uint256)',
        kind: 'erc721_transfer',
        args: { from: A, to: B, tokenId: '7' },
      },
    },
    {
      name: 'ERC-721 safeTransferFrom (with data)',
      data: erc721.encodeFunctionData('safeTransferFrom(address,address,uint256,bytes)', [
        A,
        B,
        7n,
        '0xbeef',
      ]),
      expected: {
        selector: '0xb88d4fde',
        name: 'safeTransferFrom',
        signature: 'safeTransferFrom(address,address,uint256,bytes)',
        kind: 'erc721_transfer',
        args: { from: A, to: B, tokenId: '7', data: '0xbeef' },
      },
    },
    {
      name: 'setApprovalForAll',
      data: erc721.encodeFunctionData('setApprovalForAll', [A, true]),
      expected: {
        selector: '0xa22cb465',
        name: 'setApprovalForAll',
        signature: 'setApprovalForAll(address,bool)',
        kind: 'set_approval_for_all',
        args: { operator: A, approved: 'true' },
      },
    },
    {
      name: 'WETH deposit',
      data: weth.encodeFunctionData('deposit', []),
      expected: {
        selector: '0xd0e30db0',
        name: 'deposit',
        signature: 'deposit()',
        kind: 'weth_deposit',
        args: {},
      },
    },
    {
      name: 'WETH withdraw',
      data: weth.encodeFunctionData('withdraw', [10n]),
      expected: {
        selector: '0x2e1a7d4d',
        name: 'withdraw',
        signature: 'withdraw(uint256)',
        kind: 'weth_withdraw',
        args: { wad: '10' },
      },
    },
    {
      name: 'an unknown selector',
      data: '0xdeadbeef0000000000000000000000000000000000000000000000000000000000000001',
      expected: { selector: '0xdeadbeef', name: null, signature: null, args: {} },
    },
    {
      name: 'an upper-case unknown selector is lowercased',
      data: '0xDEADBEEF',
      expected: { selector: '0xdeadbeef', name: null, signature: null, args: {} },
    },
    {
      name: 'data shorter than a selector',
      data: '0x1234',
      expected: { selector: '0x1234', name: null, signature: null, args: {} },
    },
  ];

  it.each(cases)('$name', ({ data, opts, expected }) => {
    expect(decodeCall(data, opts)).toMatchObject(expected);
  });

  it('no call data is no call', () => {
    expect(decodeCall('0x')).toBeUndefined();
    expect(decodeCall('')).toBeUndefined();
  });

  it('a known selector whose arguments do not decode says so and has no arguments', () => {
    const c = decodeCall('0xa9059cbb0000');
    expect(c).toMatchObject({ selector: '0xa9059cbb', name: 'transfer', args: {} });
    expect(c?.decodeError).toEqual(expect.any(String));
  });

  it('registerAbi adds a selector; a builtin selector keeps its token reading', () => {
    const swap = new Interface(['function swapExactIn(uint256 amountIn, address to, uint256[] path)']);
    const data = swap.encodeFunctionData('swapExactIn', [100n, A, [1n, 2n]]);
    expect(decodeCall(data)?.name).toBeNull();
    registerAbi([
      'function swapExactIn(uint256 amountIn, address to, uint256[] path)',
      'function transfer(address dst, uint256 wad)', // same selector as ERC-20 transfer
    ]);
    expect(decodeCall(data)).toMatchObject({
      selector: swap.getFunction('swapExactIn')!.selector,
      name: 'swapExactIn',
      signature: 'swapExactIn(uint256,address,uint256[])',
      args: { amountIn: '100', to: A, path: '["1","2"]' },
    });
    expect(decodeCall(erc20.encodeFunctionData('transfer', [A, 1n]))?.args).toEqual({ to: A, amount: '1' });
  });

  it('registerAbi refuses a fragment ethers cannot parse', () => {
    expect(() => registerAbi(['function (('])).toThrow();
  });
});
