import { Connection, type TLSConfig } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import type { TemporalTls } from '../config.js';

/** How the service reaches a Temporal of its own: TEMPORAL_ADDRESS, and TLS and an API key when configured. */
export interface TemporalTarget {
  address: string;
  tls: TemporalTls | undefined;
  apiKey: string | undefined;
}

/** The SDK's options for `target`: the same for the client's Connection and the worker's NativeConnection. */
export function connectionOptions(target: TemporalTarget): { address: string; tls?: TLSConfig; apiKey?: string } {
  const { tls, apiKey } = target;
  return {
    address: target.address,
    ...(tls
      ? {
          tls: {
            ...(tls.ca ? { serverRootCACertificate: tls.ca.pem } : {}),
            ...(tls.client ? { clientCertPair: { crt: tls.client.crt, key: tls.client.key } } : {}),
            ...(tls.serverName ? { serverNameOverride: tls.serverName } : {}),
          },
        }
      : {}),
    ...(apiKey ? { apiKey } : {}),
  };
}

/**
 * Both connections the service makes to a Temporal of its own (the worker's native one, and the client's,
 * which also registers the search attributes), with the same TLS and API key. A failure is one sentence
 * naming the setting to look at.
 *
 * The native connection is made first: it fails at once and says why (a Rust transport error such as
 * `InvalidCertificate(UnknownIssuer)`), where the client's connection retries until its deadline and then
 * says only "Failed to connect before the deadline", whatever the cause.
 */
export async function connectTemporal(
  target: TemporalTarget,
): Promise<{ connection: Connection; nativeConnection: NativeConnection }> {
  const options = connectionOptions(target);
  const nativeConnection = await NativeConnection.connect(options).catch((err: unknown) => {
    throw explainTemporalFailure(err, target);
  });
  try {
    const connection = await Connection.connect(options).catch((err: unknown) => {
      throw explainTemporalFailure(err, target);
    });
    return { connection, nativeConnection };
  } catch (err) {
    await nativeConnection.close().catch(() => undefined);
    throw err;
  }
}

/**
 * The SDK's error as a sentence naming TEMPORAL_ADDRESS and the TLS setting that is most likely wrong. The
 * patterns are the SDK's messages (its Rust core's, rustls's) as Temporal 1.29 and SDK 1.24 give them:
 * test/integration/temporal-tls.test.ts meets each against a real server.
 */
export function explainTemporalFailure(err: unknown, target: TemporalTarget): Error {
  const message = err instanceof Error ? err.message : String(err);
  const at = `the Temporal server at ${target.address} (TEMPORAL_ADDRESS)`;
  const At = `T${at.slice(1)}`;
  const { tls } = target;
  let sentence: string;
  if (/NotValidForName|CertNotValidForName|altname/i.test(message)) {
    sentence = `The certificate of ${at} is not for the name it was reached by: set TEMPORAL_TLS_SERVER_NAME to a name the certificate lists${tls?.serverName ? ` (now ${tls.serverName})` : ''}`;
  } else if (
    /UnknownIssuer|BadSignature|self[- ]signed|unable to (get|verify)|InvalidCertificate|certificate verify failed/i.test(
      message,
    )
  ) {
    sentence = tls?.ca
      ? `The certificate of ${at} does not verify against TEMPORAL_TLS_CA (${tls.ca.file}): set TEMPORAL_TLS_CA to the CA that signed the server's certificate`
      : `The certificate of ${at} does not verify against the CAs this machine trusts: set TEMPORAL_TLS_CA to the CA that signed it`;
  } else if (
    /CertificateRequired|BadCertificate|UnknownCA|certificate required|bad certificate|unknown ca/i.test(message)
  ) {
    sentence = tls?.client
      ? `${At} refused this client's certificate (TEMPORAL_TLS_CERT ${tls.client.certFile}): it must be signed by a CA the server trusts for clients`
      : `${At} requires a client certificate (mTLS): set TEMPORAL_TLS_CERT and TEMPORAL_TLS_KEY`;
  } else if (
    tls &&
    /InvalidContentType|CorruptMessage|wrong version number|InvalidMessage|packet length/i.test(message)
  ) {
    sentence = `${At} does not answer TLS: unset TEMPORAL_TLS and its files if that server is plain, or check the port`;
  } else if (
    tls &&
    /BrokenPipe|broken pipe|connection closed|ConnectionReset|connection reset|connection was not ready/i.test(message)
  ) {
    // The handshake got past our check of the server (a wrong CA fails before that, every time), then the
    // server hung up: what a frontend requiring client certificates does, its alert racing its close
    // (Temporal 1.29, SDK 1.24: "CertificateRequired" about a third of the time, else a broken pipe,
    // "connection closed" or, on a loaded machine, "connection was not ready").
    sentence = tls.client
      ? `${At} closed the TLS connection, as a server does that does not trust this client's certificate (TEMPORAL_TLS_CERT ${tls.client.certFile}): it must be signed by a CA the server trusts for clients`
      : `${At} closed the TLS connection, as a server does that requires a client certificate (mTLS): set TEMPORAL_TLS_CERT and TEMPORAL_TLS_KEY`;
  } else if (
    !tls &&
    /BrokenPipe|broken pipe|connection closed|connection reset|ConnectionReset|connection was not ready|h2 protocol error/i.test(
      message,
    )
  ) {
    sentence = `${At} closed the connection: if it serves TLS, set TEMPORAL_TLS=true (and TEMPORAL_TLS_CA for a private CA)`;
  } else if (/Unauthenticated|PermissionDenied|unauthorized|api key/i.test(message)) {
    sentence = `${At} refused the credentials: check TEMPORAL_API_KEY${tls?.client ? ' and TEMPORAL_TLS_CERT/TEMPORAL_TLS_KEY' : ''}`;
  } else {
    sentence = `Could not connect to ${at}${tls ? ' over TLS' : ''}: check TEMPORAL_ADDRESS${tls ? ', TEMPORAL_TLS_CA and TEMPORAL_TLS_SERVER_NAME' : ''}`;
  }
  // The SDK's own message stays the cause (src/main.ts prints it under the sentence).
  return new Error(sentence, { cause: err });
}
