import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';

// Traces are on when an OTLP endpoint is set (contract section 9); where spans go follows the OTLP
// specification's reading of the settings.
const tracing = (env: Record<string, string>) => loadConfig(env).tracing;

describe('the tracing settings', () => {
  it('are off without an endpoint, and name the service only when asked', () => {
    expect(tracing({})).toEqual({ tracesUrl: undefined, serviceName: undefined });
    expect(tracing({ OTEL_EXPORTER_OTLP_ENDPOINT: '' }).tracesUrl).toBeUndefined();
    expect(tracing({ OTEL_SERVICE_NAME: 'wfa-api' }).serviceName).toBe('wfa-api');
  });

  it('send spans to v1/traces under the endpoint, or to the traces endpoint as given', () => {
    expect(tracing({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }).tracesUrl).toBe(
      'http://collector:4318/v1/traces',
    );
    expect(tracing({ OTEL_EXPORTER_OTLP_ENDPOINT: 'https://otel.example.com/ingest/' }).tracesUrl).toBe(
      'https://otel.example.com/ingest/v1/traces',
    );
    expect(
      tracing({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318',
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://traces:9999/custom',
      }).tracesUrl,
    ).toBe('http://traces:9999/custom');
  });

  it('are off with OTEL_SDK_DISABLED=true whatever the endpoint', () => {
    expect(
      tracing({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_SDK_DISABLED: 'TRUE' }).tracesUrl,
    ).toBeUndefined();
  });

  it('refuse an endpoint that is not an http(s) URL, naming the variable', () => {
    expect(() => loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4317' })).toThrow(ConfigError);
    expect(() => loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4317' })).toThrow(/OTEL_EXPORTER_OTLP_ENDPOINT/);
    expect(() => loadConfig({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'grpc://x' })).toThrow(
      /OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: must be an http\(s\) URL/,
    );
  });
});
