import { AbiCoder, makeError } from 'ethers';
import { describeRpcError, revertReason } from './evm-rpc.js';

describe('revertReason', () => {
  it("reads Error(string), names a custom error's selector and an empty revert", () => {
    const data = `0x08c379a0${AbiCoder.defaultAbiCoder().encode(['string'], ['nope']).slice(2)}`;
    expect(revertReason({ reason: 'nope', data })).toBe('nope');
    expect(revertReason({ reason: null, data: '0xdeadbeef00' })).toBe(
      'execution reverted (custom error 0xdeadbeef)',
    );
    expect(revertReason({ reason: 'require(false)', data: '0x' })).toBe(
      'execution reverted (no reason given)',
    );
    expect(revertReason({})).toBe('execution reverted (no reason given)');
  });
});

describe('describeRpcError', () => {
  it("gives the node's message without any URL", () => {
    const err = makeError('bad', 'UNKNOWN_ERROR', {
      error: { message: 'failed to reach https://key@rpc.example/v3/SECRET' },
    });
    expect(describeRpcError(err)).toBe('failed to reach <url>');
  });
});
