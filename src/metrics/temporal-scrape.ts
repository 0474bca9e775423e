/** How long a scrape waits for the SDK's exporter: a Prometheus scrape times out after 10 s by default. */
const TIMEOUT_MS = 2_000;

/**
 * The Temporal SDK's own metrics (`temporal_…`), read from its Prometheus exporter on loopback
 * (src/temporal/runtime.ts) in the same text format, to be appended to the service's. The two never share a
 * metric name (the SDK's all start with `temporal_`). When the exporter does not answer (the SDK shuts its
 * runtime down while the process has no Temporal connection), a comment says so and the service's own
 * metrics are still served: one part missing must not fail the whole scrape.
 */
export async function scrapeTemporalSdk(url: string, timeoutMs = TIMEOUT_MS): Promise<string> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    if (!res.ok) {
      await res.body?.cancel();
      return `# Temporal SDK metrics unavailable: its exporter answered HTTP ${res.status}\n`;
    }
    const text = await res.text();
    return text === '' || text.endsWith('\n') ? text : `${text}\n`;
  } catch (err) {
    const why = err instanceof Error && err.name === 'TimeoutError' ? `no answer within ${timeoutMs} ms` : 'no answer';
    return `# Temporal SDK metrics unavailable: its exporter gave ${why}\n`;
  }
}
