import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { createServiceMetrics } from '../../src/metrics/service-metrics.js';

/**
 * The Grafana dashboard (docs/grafana-dashboard.json) and "Metrics and health" in docs/operations.md name the
 * metrics the service registers, so neither drifts from the code: a metric renamed in the code fails here.
 */
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const read = (file: string) => readFileSync(`${ROOT}/${file}`, 'utf8');

interface Panel {
  type: string;
  title: string;
  datasource?: { uid?: string };
  targets?: { expr: string; datasource?: { uid?: string } }[];
}

/** The families the service's own registry exposes, with their type (`# TYPE name type`). */
async function families(): Promise<Map<string, string>> {
  const text = await createServiceMetrics().scrape();
  return new Map([...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((m) => [m[1]!, m[2]!]));
}

/** A sample name as a query writes it, back to its family: `…_bucket`, `…_count`, `…_sum` of a histogram. */
function familyOf(name: string, known: Map<string, string>): string {
  const base = name.replace(/_(bucket|count|sum)$/, '');
  return base !== name && known.get(base) === 'histogram' ? base : name;
}

describe('the metrics documentation', () => {
  it('the Grafana dashboard is valid JSON with a Prometheus data source variable that every query uses', () => {
    const dashboard = JSON.parse(read('docs/grafana-dashboard.json')) as {
      templating: { list: { name: string; type: string; query: unknown }[] };
      panels: Panel[];
    };
    const variable = dashboard.templating.list.find((v) => v.type === 'datasource');
    expect(variable).toMatchObject({ name: 'datasource', query: 'prometheus' });
    const graphs = dashboard.panels.filter((p) => p.type !== 'row');
    expect(graphs.length).toBeGreaterThanOrEqual(10);
    for (const p of graphs) {
      expect(p.datasource?.uid, p.title).toBe('${datasource}');
      expect(p.targets?.length, p.title).toBeGreaterThan(0);
      for (const t of p.targets!) expect(t.datasource?.uid, p.title).toBe('${datasource}');
    }
  });

  it('the dashboard queries only metrics the service registers, and every wfa_ metric somewhere', async () => {
    const known = await families();
    const dashboard = JSON.parse(read('docs/grafana-dashboard.json')) as { panels: Panel[] };
    const exprs = dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr));
    const used = new Set(
      exprs.flatMap((e) => [...e.matchAll(/\b((?:wfa|process|nodejs|temporal)_\w+)/g)].map((m) => m[1]!)),
    );
    for (const name of used) {
      // The SDK's metrics come from its exporter at run time (test/e2e/metrics.test.ts reads some).
      if (name.startsWith('temporal_')) continue;
      expect(known.has(familyOf(name, known)), name).toBe(true);
    }
    const queried = new Set([...used].map((n) => familyOf(n, known)));
    for (const name of [...known.keys()].filter((n) => n.startsWith('wfa_'))) expect(queried, name).toContain(name);
    for (const sdk of ['temporal_worker_task_slots_used', 'temporal_workflow_task_execution_latency_bucket'])
      expect(used, sdk).toContain(sdk);
  });

  it('docs/operations.md lists every wfa_ metric with its type, and no other', async () => {
    const known = await families();
    const doc = read('docs/operations.md');
    const start = doc.indexOf('\n## Metrics and health\n');
    expect(start, 'docs/operations.md has a "## Metrics and health" section').toBeGreaterThanOrEqual(0);
    const next = doc.indexOf('\n## ', start + 1);
    const section = doc.slice(start, next < 0 ? undefined : next);
    const rows = new Map(
      [...section.matchAll(/^\| `(wfa_\w+)` \| (\w+) \|/gm)].map((m) => [m[1]!, m[2]!] as [string, string]),
    );
    const registered = new Map([...known].filter(([name]) => name.startsWith('wfa_')));
    expect(Object.fromEntries(rows)).toEqual(Object.fromEntries(registered));
  });
});
