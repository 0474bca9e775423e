import { JOB_STATUS, PLAN_STATUS } from '../alterations/model.js';

/** Human output of the CLI: aligned tables, counts with separators, and bars. */

const number = new Intl.NumberFormat('en-US');
export const n = (v: number) => number.format(v);

export function table(rows: Record<string, unknown>[], columns: string[]): string {
  if (rows.length === 0) return '(none)';
  const cell = (v: unknown) =>
    v === null || v === undefined ? '' : typeof v === 'object' ? JSON.stringify(v) : String(v);
  const widths = columns.map((c) => Math.max(c.length, ...rows.map((r) => cell(r[c]).length)));
  const line = (values: string[]) =>
    values
      .map((v, i) => v.padEnd(widths[i]!))
      .join('  ')
      .trimEnd();
  return [line(columns.map((c) => c.toUpperCase())), ...rows.map((r) => line(columns.map((c) => cell(r[c]))))].join(
    '\n',
  );
}

/** A bar of `width` cells split by parts (done, failed, …), each drawn with its own character. */
export function stackedBar(parts: { value: number; char: string }[], total: number, width = 40): string {
  if (total <= 0) return '░'.repeat(width);
  let used = 0;
  let out = '';
  for (const p of parts) {
    const cells = Math.min(width - used, Math.round((p.value / total) * width));
    out += p.char.repeat(cells);
    used += cells;
  }
  return out + '░'.repeat(width - used);
}

export function duration(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return '?';
  if (seconds < 60) return `${Math.round(seconds)}s`;
  const m = Math.floor(seconds / 60);
  if (m < 60) return `${m}m${String(Math.round(seconds % 60)).padStart(2, '0')}s`;
  return `${Math.floor(m / 60)}h${String(m % 60).padStart(2, '0')}m`;
}

const nameOf = (values: Record<string, number>) => {
  const names = new Map(Object.entries(values).map(([k, v]) => [v, k]));
  return (status: number) => names.get(status) ?? String(status);
};
export const planStatusName = nameOf(PLAN_STATUS);
export const jobStatusName = nameOf(JOB_STATUS);
