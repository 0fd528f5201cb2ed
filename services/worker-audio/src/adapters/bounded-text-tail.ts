/**
 * Keeps only the last `maxChars` characters of a stream of text: a process that logs
 * gigabytes costs at most this much memory, and the end is what explains a failure.
 */
export class BoundedTextTail {
  private chunks: string[] = [];
  private length = 0;
  private dropped = false;

  constructor(private readonly maxChars: number) {}

  append(text: string): void {
    this.chunks.push(text);
    this.length += text.length;
    if (this.length > this.maxChars * 2) this.compact();
  }

  private compact(): void {
    const joined = this.chunks.join('');
    const kept = joined.slice(-this.maxChars);
    this.dropped ||= kept.length < joined.length;
    this.chunks = [kept];
    this.length = kept.length;
  }

  /** True once anything was discarded. */
  get truncated(): boolean {
    return this.dropped || this.length > this.maxChars;
  }

  toString(): string {
    this.compact();
    return this.chunks.join('');
  }
}
