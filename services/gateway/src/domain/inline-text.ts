import { countCharacters, LIMITS } from '@tamp/proto';

export type InlineTextPlan =
  | { kind: 'text'; text: string }
  | { kind: 'stored-text'; bytes: Buffer; size: number; characters: number };

/**
 * Fast-path-sized text travels in the createJob message; anything larger is stored in S3 under
 * the job's input key first, so big text never crosses NATS.
 */
export function planInlineText(text: string): InlineTextPlan {
  const size = Buffer.byteLength(text, 'utf8');
  if (size <= LIMITS.textFastPathBytes) return { kind: 'text', text };
  return {
    kind: 'stored-text',
    bytes: Buffer.from(text, 'utf8'),
    size,
    characters: countCharacters(text),
  };
}
