import { describe, expect, it } from 'vitest';
import { ImageLimitError } from './errors';
import { assertInputWithinBudget, assertOutputWithinLimits, isInputFormat } from './image-limits';

describe('assertInputWithinBudget', () => {
  it('counts every decoded frame against the budget', () => {
    expect(() => assertInputWithinBudget({ width: 100, height: 100 }, 1, 10_000)).not.toThrow();
    expect(() => assertInputWithinBudget({ width: 100, height: 100 }, 2, 10_000)).toThrow(
      '2 frames of 100×100 (0.0 megapixels), over the limit of 0.0 megapixels',
    );
  });

  it('says what the limit is in megapixels', () => {
    const error = (() => {
      try {
        assertInputWithinBudget({ width: 20000, height: 10000 }, 1, 100_000_000);
      } catch (caught) {
        return caught;
      }
    })();
    expect(error).toBeInstanceOf(ImageLimitError);
    expect(error).toMatchObject({
      code: 'IMAGE_TOO_LARGE',
      permanent: true,
      message: 'Image is 20000×10000 (200.0 megapixels), over the limit of 100.0 megapixels',
    });
  });
});

describe('assertOutputWithinLimits', () => {
  const input = { width: 1000, height: 1000 };

  it('checks every step of the chain against the budget', () => {
    const steps = [
      { width: 8000, height: 8000 },
      { width: 100, height: 100 },
    ];
    expect(() => assertOutputWithinLimits(input, steps, 1, 50_000_000, 'png')).toThrow(
      'Resizing would produce 8000×8000 (64.0 megapixels), over the limit of 50.0 megapixels',
    );
    expect(() => assertOutputWithinLimits(input, steps, 1, 64_000_000, 'png')).not.toThrow();
  });

  it('checks the final size, or the input when nothing resizes, against the format', () => {
    const wide = { width: 16384, height: 10 };
    expect(() => assertOutputWithinLimits(wide, [], 1, 1e9, 'webp')).toThrow(
      'WEBP output is limited to 16383 pixels per side; the result would be 16384×10',
    );
    expect(() => assertOutputWithinLimits(wide, [], 1, 1e9, 'avif')).not.toThrow();
    expect(() => assertOutputWithinLimits(wide, [], 1, 1e9, 'png')).not.toThrow();
    expect(() =>
      assertOutputWithinLimits(input, [{ width: 70000, height: 16 }], 1, 1e9, 'jpeg'),
    ).toThrow(ImageLimitError);
  });
});

describe('isInputFormat', () => {
  it('accepts the API input formats only', () => {
    expect(['jpeg', 'png', 'webp'].every(isInputFormat)).toBe(true);
    expect(['svg', 'gif', 'heif', 'tiff', undefined].some(isInputFormat)).toBe(false);
  });
});
