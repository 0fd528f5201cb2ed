import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

const SEALED_PREFIX = 'enc:v1:';

/**
 * Webhook secrets at rest: AES-256-GCM under `SECRETS_ENCRYPTION_KEY` when one is configured,
 * else plain. Sealed values are self-describing, so turning encryption on later still reads the
 * secrets stored before.
 */
export class SecretSealer {
  constructor(private readonly key: Buffer | null) {
    if (key !== null && key.length !== 32) throw new Error('The encryption key must be 32 bytes');
  }

  seal(secret: string): string {
    if (this.key === null) return secret;
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    const ciphertext = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final()]);
    const parts = [iv, cipher.getAuthTag(), ciphertext].map((part) => part.toString('base64'));
    return SEALED_PREFIX + parts.join(':');
  }

  open(stored: string): string {
    if (!stored.startsWith(SEALED_PREFIX)) return stored;
    if (this.key === null) throw new Error('A sealed secret needs SECRETS_ENCRYPTION_KEY');
    const [iv, tag, ciphertext] = stored
      .slice(SEALED_PREFIX.length)
      .split(':')
      .map((part) => Buffer.from(part, 'base64'));
    if (iv === undefined || tag === undefined || ciphertext === undefined) {
      throw new Error('Malformed sealed secret');
    }
    const decipher = createDecipheriv('aes-256-gcm', this.key, iv);
    decipher.setAuthTag(tag);
    return Buffer.concat([decipher.update(ciphertext), decipher.final()]).toString('utf8');
  }
}

/** A secret replaced by a rotation, kept (as stored) until the end of its grace period. */
export interface RetiredWebhookSecret<Secret = string> {
  secret: Secret;
  validUntil: Date;
}

/**
 * The retired secret while it still signs at `now` (its grace period excludes `validUntil`
 * itself), else null: the one rule billing applies to every account view.
 */
export function secretInGrace<Secret>(
  retired: RetiredWebhookSecret<Secret> | null | undefined,
  now: Date,
): RetiredWebhookSecret<Secret> | null {
  return retired != null && now.getTime() < retired.validUntil.getTime() ? retired : null;
}
