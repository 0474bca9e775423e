import type { Flowchart } from '../engine/definition-schema.js';
import type { ActivityCount } from '../engine/incident-groups.js';

/**
 * A definition version's flowchart as an SVG drawn on the server (no script): each activity a box in the column
 * of its distance from the start, arrows for the connections, and on each box how many unfinished instances wait
 * on it, have it scheduled, or have an incident on it. Presentation attributes only (the console's CSP allows no
 * inline style). A flowchart of more than MAX_DRAWN activities is not drawn: the table beside it lists them all.
 */
export const MAX_DRAWN = 150;

const BOX_W = 190;
const BOX_H = 62;
const GAP_X = 56;
const GAP_Y = 22;
const PAD = 12;

interface Placed {
  id: string;
  x: number;
  y: number;
  counts: ActivityCount | undefined;
  label: string;
}

/** Each activity's column: its distance from the start (or from any activity nothing leads to), breadth first. */
function columns(root: Flowchart): Map<string, number> {
  const ids = root.activities.map((a) => a.id);
  const next = new Map<string, string[]>();
  const led = new Set<string>();
  for (const c of root.connections) {
    next.set(c.source.activity, [...(next.get(c.source.activity) ?? []), c.target.activity]);
    led.add(c.target.activity);
  }
  const starts = root.start ? [root.start] : ids.filter((id) => !led.has(id));
  const column = new Map<string, number>();
  const queue = [...starts.filter((id) => ids.includes(id))];
  for (const id of queue) column.set(id, 0);
  while (queue.length) {
    const id = queue.shift()!;
    for (const to of next.get(id) ?? []) {
      if (!column.has(to) && ids.includes(to)) {
        column.set(to, column.get(id)! + 1);
        queue.push(to);
      }
    }
  }
  // Unreachable activities: a column of their own after the others.
  const last = Math.max(-1, ...column.values()) + 1;
  for (const id of ids) if (!column.has(id)) column.set(id, last);
  return column;
}

const short = (text: string, max: number) => (text.length > max ? `${text.slice(0, max - 1)}…` : text);

export function FlowchartSvg(props: { root: Flowchart; counts: readonly ActivityCount[]; title: string }) {
  const { root } = props;
  if (root.activities.length === 0 || root.activities.length > MAX_DRAWN) return null;
  const byId = new Map(props.counts.map((c) => [c.activityId, c]));
  const column = columns(root);
  const rows = new Map<number, number>();
  const placed = new Map<string, Placed>();
  for (const a of root.activities) {
    if (placed.has(a.id)) continue;
    const col = column.get(a.id)!;
    const row = rows.get(col) ?? 0;
    rows.set(col, row + 1);
    placed.set(a.id, {
      id: a.id,
      x: PAD + col * (BOX_W + GAP_X),
      y: PAD + row * (BOX_H + GAP_Y),
      counts: byId.get(a.id),
      label: a.type.split('.').pop() ?? a.type,
    });
  }
  const width = PAD * 2 + (Math.max(...column.values()) + 1) * (BOX_W + GAP_X) - GAP_X;
  const height = PAD * 2 + Math.max(...rows.values()) * (BOX_H + GAP_Y) - GAP_Y;
  return (
    <svg
      class="flowchart"
      role="group"
      aria-label={props.title}
      viewBox={`0 0 ${width} ${height}`}
      width={width}
      height={height}
      xmlns="http://www.w3.org/2000/svg"
    >
      <defs>
        <marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto">
          <path d="M0,0 L10,5 L0,10 z" fill="#5f6b7a" />
        </marker>
      </defs>
      {root.connections.map((c) => {
        const from = placed.get(c.source.activity);
        const to = placed.get(c.target.activity);
        if (!from || !to) return null;
        const x1 = from.x + BOX_W;
        const y1 = from.y + BOX_H / 2;
        const x2 = to.x;
        const y2 = to.y + BOX_H / 2;
        const back = x2 <= x1;
        const d = back
          ? `M${x1},${y1} C${x1 + 40},${y1 - 60} ${x2 - 40},${y2 - 60} ${x2},${y2}`
          : `M${x1},${y1} C${(x1 + x2) / 2},${y1} ${(x1 + x2) / 2},${y2} ${x2},${y2}`;
        return <path d={d} fill="none" stroke="#5f6b7a" stroke-width="1.5" marker-end="url(#arrow)" />;
      })}
      {[...placed.values()].map((p) => {
        const c = p.counts;
        const faulted = (c?.faulted ?? 0) > 0;
        const busy = (c?.waiting ?? 0) + (c?.scheduled ?? 0) > 0;
        // Each activity a labelled element a keyboard reaches (Tab) and a screen reader reads with its counts.
        const label = `${p.id} (${p.label}): ${c?.waiting ?? 0} waiting, ${c?.scheduled ?? 0} scheduled, ${c?.faulted ?? 0} faulted`;
        return (
          <g role="img" aria-label={label} tabindex="0" class="activity">
            <rect
              x={p.x}
              y={p.y}
              width={BOX_W}
              height={BOX_H}
              rx="6"
              fill={faulted ? '#fdecea' : busy ? '#e8f1fb' : '#ffffff'}
              stroke={faulted ? '#b3261e' : busy ? '#1f5fa8' : '#8a94a3'}
              stroke-width={faulted ? 2 : 1}
            />
            <text x={p.x + 8} y={p.y + 18} font-size="13" font-weight="bold" fill="#1d232b">
              {short(p.id, 24)}
            </text>
            <text x={p.x + 8} y={p.y + 34} font-size="11" fill="#3d4653">
              {short(p.label, 30)}
            </text>
            <text x={p.x + 8} y={p.y + 52} font-size="11" fill={faulted ? '#8c1d18' : '#1d232b'}>
              {`waiting ${c?.waiting ?? 0} · sched. ${c?.scheduled ?? 0} · faulted ${c?.faulted ?? 0}`}
            </text>
          </g>
        );
      })}
    </svg>
  );
}
