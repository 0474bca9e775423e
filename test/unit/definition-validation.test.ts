import { describe, expect, it } from 'vitest';
import { WorkflowDefinitionRequestSchema } from '../../src/engine/definition-schema.js';
import { validateDefinition } from '../../src/engine/flowchart.js';
import { chain, connect, event, lit, writeLine } from '../support/workflows.js';

const check = (json: unknown) => validateDefinition(WorkflowDefinitionRequestSchema.parse(json));

describe('workflow definition validation', () => {
  it('accepts the contract example', () => {
    expect(check(chain('ok', [writeLine('a', 'x'), event('b', 'go')]))).toEqual([]);
  });

  it('names an unknown activity type', () => {
    const errors = check(chain('d', [writeLine('a', 'x'), { id: 'b', type: 'Elsa.Nope' }]));
    expect(errors).toContainEqual({ path: '/root/activities/1/type', message: 'Unknown activity type "Elsa.Nope"' });
  });

  it('names a duplicate activity id', () => {
    const def = chain('d', [writeLine('a', 'x'), writeLine('b', 'y')]);
    def.root.activities.push(writeLine('a', 'z'));
    expect(check(def)).toContainEqual({ path: '/root/activities/2/id', message: 'Duplicate activity id "a"' });
  });

  it('names a connection to an unknown activity, or through an unknown port', () => {
    const def = chain('d', [writeLine('a', 'x'), writeLine('b', 'y')]);
    def.root.connections.push(connect('a', 'ghost'), connect('ghost2', 'b'), connect('a', 'b', 'Nope'));
    def.root.connections.push({ source: { activity: 'a', port: 'Done' }, target: { activity: 'b', port: 'Out' } });
    const paths = check(def).map((e) => e.path);
    expect(paths).toEqual(
      expect.arrayContaining([
        '/root/connections/1/target/activity',
        '/root/connections/2/source/activity',
        '/root/connections/3/source/port',
        '/root/connections/4/target/port',
      ]),
    );
  });

  it('names a missing required input', () => {
    const errors = check(chain('d', [{ id: 'a', type: 'Elsa.WriteLine' }]));
    expect(errors).toEqual([
      { path: '/root/activities/0/text', message: 'Missing required input "text" for activity type Elsa.WriteLine' },
    ]);
  });

  it('names an unknown input instead of ignoring a typo', () => {
    const errors = check(chain('d', [{ id: 'a', type: 'Elsa.WriteLine', text: lit('x'), txet: lit('y') }]));
    expect(errors).toEqual([
      { path: '/root/activities/0/txet', message: 'Unknown input "txet" for activity type Elsa.WriteLine' },
    ]);
  });

  it('names an unknown variable typeName', () => {
    const errors = check(chain('d', [writeLine('a', 'x')], { variables: [{ id: 'v', typeName: 'Decimal128' }] }));
    expect(errors).toHaveLength(1);
    expect(errors[0]!.path).toBe('/variables/0/typeName');
  });

  it('names a reference to an undeclared variable', () => {
    const errors = check(
      chain('d', [
        {
          id: 'a',
          type: 'Elsa.WriteLine',
          text: { typeName: 'String', expression: { type: 'Variable', value: 'nope' } },
        },
      ]),
    );
    expect(errors.map((e) => e.path)).toEqual(['/root/activities/0/text/expression/value']);
  });

  it('requires a unique start activity', () => {
    const two = {
      definitionId: 'd',
      root: {
        type: 'Elsa.Flowchart',
        id: 'f',
        activities: [writeLine('a', 'x'), writeLine('b', 'y')],
        connections: [],
      },
    };
    expect(check(two)).toEqual([
      {
        path: '/root/start',
        message: 'No unique start activity: 2 activities have no inbound connection (a, b); set root.start',
      },
    ]);
    const cycle = {
      definitionId: 'd',
      root: {
        type: 'Elsa.Flowchart',
        id: 'f',
        activities: [writeLine('a', 'x'), writeLine('b', 'y')],
        connections: [connect('a', 'b'), connect('b', 'a')],
      },
    };
    expect(check(cycle).map((e) => e.path)).toEqual(['/root/start']);
    expect(check({ ...two, root: { ...two.root, start: 'a' } })).toEqual([]);
    expect(check({ ...two, root: { ...two.root, start: 'zz' } }).map((e) => e.path)).toEqual(['/root/start']);
  });
});
