/** A source of numbers in [0, 1), like Math.random, but the same sequence for the same seed. */
export type Random = () => number;

/** mulberry32: tiny, fast, good enough for test pixels and documents, the same on every platform. */
export function seededRandom(seed: number): Random {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
