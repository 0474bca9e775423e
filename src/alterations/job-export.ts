import { JOB_STATUS } from './model.js';
import type { JobView } from './views.js';

/**
 * A plan's jobs written out for keeping (contract section 13, before its retention purges them): one JSON
 * object a line (`ndjson`, each as the jobs endpoint shows a job), or CSV with a header row.
 */
export const JOB_EXPORT_FORMATS = ['ndjson', 'csv'] as const;
export type JobExportFormat = (typeof JOB_EXPORT_FORMATS)[number];

export const JOB_EXPORT_TYPES: Record<JobExportFormat, string> = {
  ndjson: 'application/x-ndjson',
  csv: 'text/csv; charset=utf-8',
};

const STATUS_NAMES: Record<number, string> = Object.fromEntries(Object.entries(JOB_STATUS).map(([k, v]) => [v, k]));

export const CSV_COLUMNS = [
  'id',
  'planId',
  'workflowInstanceId',
  'status',
  'verification',
  'createdAt',
  'startedAt',
  'completedAt',
  'log',
] as const;

/**
 * One CSV cell: quoted when it holds a comma, a quote or a line break (quotes doubled, RFC 4180); a cell a
 * spreadsheet would run as a formula (`=`, `+`, `-`, `@`, a tab or a carriage return first) gets a `'` in front.
 */
export function csvCell(value: string | null): string {
  if (value === null) return '';
  const safe = /^[=+\-@\t\r]/.test(value) ? `'${value}` : value;
  return /[",\r\n]/.test(safe) ? `"${safe.replace(/"/g, '""')}"` : safe;
}

export function csvHeader(): string {
  return `${CSV_COLUMNS.join(',')}\r\n`;
}

/** A page of jobs as lines of the format. */
export function exportLines(jobs: readonly JobView[], format: JobExportFormat): string {
  if (format === 'ndjson') return jobs.map((j) => `${JSON.stringify(j)}\n`).join('');
  return jobs
    .map(
      (j) =>
        `${[
          j.id,
          j.planId,
          j.workflowInstanceId,
          STATUS_NAMES[j.status] ?? String(j.status),
          j.verification,
          j.createdAt,
          j.startedAt,
          j.completedAt,
          j.log.map((l) => l.message).join(' | '),
        ]
          .map(csvCell)
          .join(',')}\r\n`,
    )
    .join('');
}
