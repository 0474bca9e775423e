/**
 * Where the service's memory is, read from its own `GET /metrics` (prom-client's process and Node.js
 * figures): every `intervalMs`, and per labelled phase the sample with the largest RSS, split into V8's heap
 * (used and total), what V8 counts outside it (`external`: Buffers and array buffers) and the rest of the RSS
 * (native: the Temporal SDK's core and its connections, malloc, code, stacks).
 */
export interface HeapSample {
  rssMb: number;
  heapUsedMb: number;
  heapTotalMb: number;
  externalMb: number;
  /** RSS less V8's heap and external memory. */
  nativeMb: number;
}

const mb = (bytes: number) => Math.round((bytes / 1024 / 1024) * 10) / 10;

function gauge(text: string, name: string): number | undefined {
  const m = new RegExp(`^${name} ([0-9.e+]+)`, 'm').exec(text);
  return m ? Number(m[1]) : undefined;
}

export class HeapSampler {
  private timer: NodeJS.Timeout | undefined;
  private current: string | undefined;
  readonly byPhase = new Map<string, HeapSample>();

  constructor(
    private readonly base: string,
    private readonly key: string,
    private readonly intervalMs = 1000,
  ) {}

  start(): void {
    this.timer = setInterval(() => void this.sample(), this.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  phase(label: string | undefined): void {
    this.current = label;
  }

  async sample(): Promise<HeapSample | undefined> {
    const label = this.current;
    const text = await fetch(`${this.base}/metrics`, { headers: { authorization: `ApiKey ${this.key}` } }).then(
      (r) => (r.ok ? r.text() : ''),
      () => '',
    );
    const rss = gauge(text, 'process_resident_memory_bytes');
    const used = gauge(text, 'nodejs_heap_size_used_bytes');
    const total = gauge(text, 'nodejs_heap_size_total_bytes');
    const external = gauge(text, 'nodejs_external_memory_bytes');
    if (rss === undefined || used === undefined || total === undefined || external === undefined) return undefined;
    const s: HeapSample = {
      rssMb: mb(rss),
      heapUsedMb: mb(used),
      heapTotalMb: mb(total),
      externalMb: mb(external),
      nativeMb: mb(rss - total - external),
    };
    if (label && (this.byPhase.get(label)?.rssMb ?? -1) < s.rssMb) this.byPhase.set(label, s);
    return s;
  }
}
