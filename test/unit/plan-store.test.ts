import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * The plan has one home: only src/alterations/plan-store/ runs SQL on the plan table, and only the plan
 * vocabulary (src/vocabulary/plan.ts) spells a plan status as a number. A statement written anywhere else, or a
 * bare status compared or stored, fails here.
 */
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

function* sources(dir: string): Generator<string> {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    if (entry.isDirectory()) yield* sources(p);
    else if (/\.tsx?$/.test(entry.name)) yield p;
  }
}
const all = () => ['src', 'workflows', 'activities'].flatMap((top) => [...sources(path.join(ROOT, top))]);
const rel = (file: string) => path.relative(ROOT, file);

describe('the plan store', () => {
  it('is the only module with SQL on the plan table', () => {
    const elsewhere = all()
      .filter((f) => !rel(f).startsWith(path.join('src', 'alterations', 'plan-store') + path.sep))
      .filter((f) => /\balteration_plans\b/.test(readFileSync(f, 'utf8')))
      .map(rel);
    expect(elsewhere).toEqual([]);
  });

  it('leaves plan statuses to the vocabulary: no bare status number compared or written in SQL', () => {
    const bare: string[] = [];
    for (const f of all()) {
      if (rel(f) === path.join('src', 'vocabulary', 'plan.ts')) continue;
      readFileSync(f, 'utf8')
        .split('\n')
        .forEach((line, i) => {
          // `status = 8`, `status === 7`, `status IN (4, 5)`, `{ 4: 'Completed' }`, `new Set([4, 5, 6])`.
          if (
            /\bstatus\s*(===?|!==?|<>|<=?|>=?)\s*[0-8]\b(?!\d)/i.test(line) ||
            /\bstatus\s+IN\s*\(\s*[0-8]\b/i.test(line) ||
            /\{\s*[0-8]:\s*'(Pending|Generating|Dispatching|Running|Completed|Failed|Cancelled|Paused|AwaitingApproval)'/.test(
              line,
            )
          )
            bare.push(`${rel(f)}:${i + 1}: ${line.trim()}`);
        });
    }
    expect(bare).toEqual([]);
  });
});
