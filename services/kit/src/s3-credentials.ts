import type { ClientOptions } from 'minio';
// minio-js exports its credentials classes only by path; its client takes any subclass of this
// one (it calls getCredentials() before every request).
import { CredentialProvider } from 'minio/dist/esm/CredentialProvider.mjs';
import { Credentials } from 'minio/dist/esm/Credentials.mjs';

/** S3 credentials as the AWS SDK gives them: temporary ones carry a session token and expire. */
export interface S3Identity {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string | undefined;
  expiration?: Date | undefined;
}

/** Where a store's current credentials come from; asked before every request and presign. */
export type S3IdentitySource = () => Promise<S3Identity>;

/**
 * The AWS SDK's standard Node credential chain (`fromNodeProviderChain`), for a deployment that
 * gives no static keys: in order, AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (/ AWS_SESSION_TOKEN),
 * the shared config and credentials files (AWS_PROFILE), a web identity token file (IRSA:
 * AWS_WEB_IDENTITY_TOKEN_FILE with AWS_ROLE_ARN), container credentials (ECS, EKS Pod Identity:
 * AWS_CONTAINER_CREDENTIALS_FULL_URI or _RELATIVE_URI) and the instance metadata service. The
 * SDK keeps what it found; temporary credentials are fetched again in the background from five
 * minutes before they expire, so asking for every request costs nothing.
 *
 * The SDK is imported on the first call, so a process with static keys never loads it (the
 * workers' memory is budgeted; measured: importing it and making the chain adds about 0.2 MiB
 * of heap, resolving through every provider with its STS client about 1.5 MiB).
 */
export function awsCredentialChain(): S3IdentitySource {
  let chain: Promise<S3IdentitySource> | undefined;
  return async () => {
    chain ??= import('@aws-sdk/credential-providers').then(({ fromNodeProviderChain }) =>
      fromNodeProviderChain(),
    );
    try {
      return await (await chain)();
    } catch (error) {
      throw new Error(
        'S3_ACCESS_KEY and S3_SECRET_KEY are not set, and the AWS credential chain gave no ' +
          `credentials (env, profile, web identity, container, instance metadata): ${messageOf(error)}`,
        { cause: error },
      );
    }
  };
}

/** minio-js's view of an S3IdentitySource: its client re-reads the credentials before each request. */
export class IdentitySourceProvider extends CredentialProvider {
  constructor(private readonly source: S3IdentitySource) {
    // The base class's own credentials are never read: getCredentials is replaced.
    super({ accessKey: '', secretKey: '' });
  }

  override async getCredentials(): Promise<Credentials> {
    const identity = await this.source();
    return new Credentials({
      accessKey: identity.accessKeyId,
      secretKey: identity.secretAccessKey,
      ...(identity.sessionToken === undefined ? {} : { sessionToken: identity.sessionToken }),
    });
  }

  /**
   * As the client's option: the package's root types are its CommonJS declarations, whose
   * CredentialProvider is another (nominally different) declaration of this same ESM class.
   */
  asClientOption(): ClientOptions['credentialsProvider'] {
    return this as unknown as ClientOptions['credentialsProvider'];
  }
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
