import { JOB_STATUS, PLAN_STATUS } from '../alterations/model.js';
import type { JobCounts } from '../alterations/views.js';

/** Human output of the CLI: aligned tables, counts with separators, and bars. */

/**
 * Control characters of C0 and C1 (ESC, BEL, CR, …, but not the newline and tab the CLI lays its output out
 * with) and the bidirectional overrides that reorder what a terminal shows.
 */
// eslint-disable-next-line no-control-regex
const UNSAFE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;
// eslint-disable-next-line no-control-regex
const UNSAFE_IN_CELL = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;
const escaped = (c: string) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;

/**
 * Text for a terminal: what a server or a stored value says is shown, never obeyed. Escape sequences (a
 * window title, a cleared screen, forged colours, a clipboard write through OSC 52) and bidi overrides
 * become visible `\u001b`-style escapes. Human output goes through this; `--json` keeps the data as it is.
 */
export function safeText(text: string): string {
  return text.replace(UNSAFE, escaped);
}

/** A value inside a table cell or a one-line message: newlines and tabs escaped too, so it cannot add lines. */
export function safeCell(text: string): string {
  return text.replace(UNSAFE_IN_CELL, escaped);
}

const number = new Intl.NumberFormat('en-US');
export const n = (v: number) => number.format(v);

export function table(rows: Record<string, unknown>[], columns: string[]): string {
  const lines: string[] = [];
  const writer = tableWriter(columns, (line) => lines.push(line));
  writer.add(rows);
  writer.end();
  return lines.join('\n');
}

const cellText = (v: unknown) =>
  safeCell(v === null || v === undefined ? '' : typeof v === 'object' ? JSON.stringify(v) : String(v));

/**
 * A table written as its rows arrive (page after page): the header and the column widths come from the
 * first rows; a later cell wider than its column widens that row only. No rows at all: `(none)`.
 */
export function tableWriter(columns: string[], write: (line: string) => void) {
  let widths: number[] | undefined;
  const line = (values: string[]) =>
    values
      .map((v, i) => v.padEnd(widths![i]!))
      .join('  ')
      .trimEnd();
  return {
    add(rows: Record<string, unknown>[]) {
      if (rows.length === 0) return;
      const cells = rows.map((r) => columns.map((c) => cellText(r[c])));
      if (!widths) {
        widths = columns.map((c, i) => Math.max(c.length, ...cells.map((r) => r[i]!.length)));
        write(line(columns.map((c) => c.toUpperCase())));
      }
      for (const r of cells) write(line(r));
    },
    end() {
      if (!widths) write('(none)');
    },
  };
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
  // A status this CLI does not know is shown as sent, escaped (it comes from the server).
  return (status: number) => names.get(status) ?? safeCell(String(status));
};
export const planStatusName = nameOf(PLAN_STATUS);
export const jobStatusName = nameOf(JOB_STATUS);

/**
 * A plan's status with what its jobs came to when that is not plain success: a Completed plan whose jobs
 * failed is still Completed (contract section 4), which alone would read as success.
 */
export function planStatusText(
  status: number,
  counts: JobCounts,
  verification?: { unverified: number } | null,
): string {
  const name = planStatusName(status);
  // Under `verify`, a completed job not verified did not work either: Completed alone would read as success.
  const unverified = verification?.unverified ?? 0;
  if (status === PLAN_STATUS.Completed && unverified > 0) {
    const ran = counts.total - (counts.skipped ?? 0);
    const failed = counts.failed ? `${n(counts.failed)} failed, ` : '';
    return `${name} — ${failed}${n(unverified)} not verified, of ${n(ran)} jobs`;
  }
  if (status !== PLAN_STATUS.Completed || counts.failed === 0) return name;
  if (counts.failed < counts.total) return `${name} — ${n(counts.failed)} of ${n(counts.total)} jobs failed`;
  return `${name} — ${counts.total === 1 ? 'its one job failed' : `all ${n(counts.total)} jobs failed`}`;
}

/**
 * A tenant as people read it: the default tenant (null in the API and in --json) is `default`, the word the
 * Temporal UI shows for it (the AlterationTenant search attribute, contract section 7), so that a table of
 * `wfa` and a Temporal filter name it alike; `*` is the tenant-agnostic one.
 */
export function tenantName(tenantId: string | null): string {
  return tenantId ?? 'default';
}

/** A word as a POSIX shell reads it back: as it is when it is plain, else in single quotes. */
export function shellWord(word: string): string {
  return /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}
