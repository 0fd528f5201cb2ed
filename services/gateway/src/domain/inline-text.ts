import { LIMITS } from '@tamp/proto';

/** Unicode code points, the unit of the spec's "characters" (an emoji counts once). */
export function countCharacters(text: string): number {
  let surrogatePairs = 0;
  for (let index = 0; index < text.length; index++) {
    const code = text.charCodeAt(index);
    if (code >= 0xd800 && code <= 0xdbff) {
      const next = text.charCodeAt(index + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        surrogatePairs++;
        index++;
      }
    }
  }
  return text.length - surrogatePairs;
}

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
