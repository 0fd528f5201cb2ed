import type { ImageOperation } from '@tamp/proto';
import { describe, expect, it } from 'vitest';
import { InvalidOperationChainError } from './errors';
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

  it('refuses chains that break the resolved-chain contract', () => {
    expect(() => planOperations([])).toThrow(InvalidOperationChainError);
    expect(() => planOperations([resize])).toThrow('the last operation must be encode');
    expect(() => planOperations([encode, encode])).toThrow('only the last one may be encode');
    const sizeless: ImageOperation = {
      type: 'resize',
      params: { fit: 'cover', position: 'centre' },
    };
    expect(() => planOperations([sizeless, encode])).toThrow('at least one of width and height');
  });
});
