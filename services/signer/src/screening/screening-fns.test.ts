import { Interface } from 'ethers';
import { evmRecipients } from './screening-fns.js';

// The addresses an EVM transaction is screened on: its `to`, and an ERC-20 call's recipient or spender.

const ERC20 = new Interface([
  'function transfer(address to, uint256 amount)',
  'function approve(address spender, uint256 amount)',
  'function transferFrom(address from, address to, uint256 amount)',
]);
const TOKEN = '0x' + 'aa'.repeat(20);
const BOB = '0x8589427373D6D84E98730D7795D8f6f8731FDA16';
const ALICE = '0x' + '11'.repeat(20);

describe('evmRecipients', () => {
  it('is the `to` of a plain transfer or an unknown call', () => {
    expect(evmRecipients(BOB, '0x')).toEqual([BOB]);
    expect(evmRecipients(BOB, '0xdeadbeef00')).toEqual([BOB]);
    expect(evmRecipients(null, '0x6080')).toEqual([]);
  });
  it('adds the recipient of transfer and transferFrom, and the spender of approve', () => {
    expect(evmRecipients(TOKEN, ERC20.encodeFunctionData('transfer', [BOB, 5n]))).toEqual([TOKEN, BOB]);
    expect(evmRecipients(TOKEN, ERC20.encodeFunctionData('transferFrom', [ALICE, BOB, 5n]))).toEqual([
      TOKEN,
      BOB,
    ]);
    expect(evmRecipients(TOKEN, ERC20.encodeFunctionData('approve', [BOB, 5n]))).toEqual([TOKEN, BOB]);
  });
  it('adds nothing for truncated ERC-20 calldata', () => {
    const data = ERC20.encodeFunctionData('transfer', [BOB, 5n]).slice(0, 40);
    expect(evmRecipients(TOKEN, data)).toEqual([TOKEN]);
  });
  it('screens the low 20 bytes of a recipient word with dirty high bytes (what old-decoder tokens pay)', () => {
    const clean = ERC20.encodeFunctionData('transfer', [BOB, 5n]);
    // Byte 0 of the address word set: ethers refuses it as an address; the token pays BOB.
    const dirty = clean.slice(0, 10) + 'ff' + clean.slice(12);
    expect(evmRecipients(TOKEN, dirty).map((a) => a.toLowerCase())).toEqual([TOKEN, BOB.toLowerCase()]);
    const from = ERC20.encodeFunctionData('transferFrom', [ALICE, BOB, 5n]);
    const dirtyFrom = from.slice(0, 10 + 64) + 'ff' + from.slice(10 + 64 + 2);
    expect(evmRecipients(TOKEN, dirtyFrom).map((a) => a.toLowerCase())).toEqual([TOKEN, BOB.toLowerCase()]);
  });
  it('adds the spender of increaseAllowance', () => {
    const I = new Interface(['function increaseAllowance(address spender, uint256 addedValue)']);
    expect(evmRecipients(TOKEN, I.encodeFunctionData('increaseAllowance', [BOB, 1n]))).toEqual([TOKEN, BOB]);
  });
});
