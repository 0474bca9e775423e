import { baseUrlProblem } from '../client/index.js';

/** The service the CLI talks to, and where that URL came from (to say what to change when it is wrong). */
export interface Target {
  url: string;
  source: '--url' | 'WFA_URL' | 'stored' | 'default';
}

export const DEFAULT_URL = 'http://localhost:3000';

/** --url, else WFA_URL, else the URL `wfa login` stored (when there is one), else the default. */
export function targetOf(option: string | undefined, env: string | undefined, stored?: string): Target {
  if (option !== undefined) return { url: option, source: '--url' };
  if (env !== undefined) return { url: env, source: 'WFA_URL' };
  if (stored !== undefined) return { url: stored, source: 'stored' };
  return { url: DEFAULT_URL, source: 'default' };
}

/** "--url http://x:3000", "WFA_URL http://x:3000", … : the URL as the user gave it, and where. */
export function where(t: Target): string {
  switch (t.source) {
    case 'stored':
      return `the URL stored by \`wfa login\` (${t.url})`;
    case 'default':
      return `the default URL ${t.url}`;
    default:
      return `${t.source} ${t.url}`;
  }
}

/** What is wrong with the target's URL and what was probably meant, or undefined when it can be used. */
export function targetProblem(t: Target): string | undefined {
  const problem = baseUrlProblem(t.url);
  if (!problem) return undefined;
  const guess = `http://${t.url}`;
  const meant = !/^[a-z][a-z0-9+.-]*:\/\//i.test(t.url) && !baseUrlProblem(guess) ? `; did you mean ${guess}?` : '';
  return `${where(t)} cannot be used: ${problem}${meant}`;
}
