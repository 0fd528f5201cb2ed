import { describe, expect, it } from 'vitest';
import { presetLabel } from './job';

describe('presetLabel', () => {
  it('labels a job by its preset, `custom` for an explicit chain, `unrecorded` when unknown', () => {
    expect(presetLabel('podcast')).toBe('podcast');
    expect(presetLabel(null)).toBe('custom');
    expect(presetLabel(undefined)).toBe('unrecorded');
  });
});
