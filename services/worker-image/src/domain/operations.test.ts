import { type ImageOperation, InvalidChainError } from '@tamp/proto';
import { describe, expect, it } from 'vitest';
import { planOperations } from './operations';

const encode: ImageOperation = {
  type: 'encode',
  params: { format: 'avif', quality: 50, effort: 2 },
};
const resize: ImageOperation = {
  type: 'resize',
  params: { width: 2048, height: 2048, fit: 'inside', position: 'centre' },
};

describe('planOperations', () => {
  it('splits a resolved chain into resizes and the final encode', () => {
    expect(planOperations([resize, resize, encode])).toEqual({
      resizes: [resize.params, resize.params],
      encode: encode.params,
    });
    expect(planOperations([encode])).toEqual({ resizes: [], encode: encode.params });
  });

  it("refuses a chain that breaks proto's resolved-chain rule", () => {
    expect(() => planOperations([])).toThrow(InvalidChainError);
    expect(() => planOperations([resize])).toThrow(InvalidChainError);
    expect(() => planOperations([encode, encode])).toThrow(InvalidChainError);
  });
});
