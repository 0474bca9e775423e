import { describe, expect, it } from 'vitest';
import { explainTemporalFailure, type TemporalTarget } from '../../src/temporal/connect.js';

/**
 * The SDK's messages as a TLS frontend requiring client certificates gave them when a client came without
 * one (Temporal 1.29, SDK 1.24, 300 tries on a loaded 2-core machine): every one of them is the same
 * sentence. The last was missing from the patterns and failed a CI run with "Could not connect…".
 */
const closedWithoutCertificate = [
  `Failed to call GetSystemInfo: code: 'Unknown error', message: "transport error", source: tonic::transport::Error(Transport, hyper::Error(Io, Custom { kind: InvalidData, error: "received fatal alert: CertificateRequired" }))`,
  `Failed to call GetSystemInfo: code: 'Unknown error', message: "transport error", source: tonic::transport::Error(Transport, hyper::Error(Io, Custom { kind: BrokenPipe, error: "stream closed because of a broken pipe" }))`,
  `Failed to call GetSystemInfo: code: 'Unknown error', message: "transport error", source: tonic::transport::Error(Transport, hyper::Error(Io, Custom { kind: BrokenPipe, error: "connection closed because of a broken pipe" }))`,
  `Failed to call GetSystemInfo: code: 'The operation was cancelled', message: "operation was canceled", source: tonic::transport::Error(Transport, hyper::Error(Canceled, "connection closed"))`,
  `Failed to call GetSystemInfo: code: 'The operation was cancelled', message: "operation was canceled", source: tonic::transport::Error(Transport, hyper::Error(Canceled, "connection was not ready"))`,
];

const target: TemporalTarget = {
  address: '127.0.0.1:7233',
  tls: { ca: { file: '/etc/ca.pem', pem: Buffer.from('') }, client: undefined, serverName: undefined },
  apiKey: undefined,
};

describe('explainTemporalFailure', () => {
  it.each(closedWithoutCertificate)('names TEMPORAL_TLS_CERT and TEMPORAL_TLS_KEY for %s', (message) => {
    expect(explainTemporalFailure(new Error(message), target).message).toMatch(
      /^The Temporal server at 127\.0\.0\.1:7233 \(TEMPORAL_ADDRESS\) (requires|closed the TLS connection, as a server does that requires) a client certificate \(mTLS\): set TEMPORAL_TLS_CERT and TEMPORAL_TLS_KEY$/,
    );
  });

  it('keeps the SDK error as the cause, and falls back to naming the address for what it does not know', () => {
    const err = new Error('Failed to call GetSystemInfo: something new');
    const explained = explainTemporalFailure(err, target);
    expect(explained.cause).toBe(err);
    expect(explained.message).toBe(
      'Could not connect to the Temporal server at 127.0.0.1:7233 (TEMPORAL_ADDRESS) over TLS: check TEMPORAL_ADDRESS, TEMPORAL_TLS_CA and TEMPORAL_TLS_SERVER_NAME',
    );
  });
});
