import { describe, expect, it } from 'vitest';
import { grantsSatisfy, structuredGrantSatisfies } from '../../src/auth/permissions.js';

describe('structured permissions', () => {
  it('an exact grant satisfies only its own permission', () => {
    expect(structuredGrantSatisfies('alterations:view', 'alterations:view')).toBe(true);
    expect(structuredGrantSatisfies('alterations:view', 'alterations:execute')).toBe(false);
  });

  it('"*" and "*:*" satisfy everything', () => {
    expect(structuredGrantSatisfies('*', 'workflows/definitions:create')).toBe(true);
    expect(structuredGrantSatisfies('*:*', 'identity/users:delete')).toBe(true);
  });

  it('"*:{verb}" covers that verb on any resource, nested resources included', () => {
    expect(structuredGrantSatisfies('*:view', 'workflows/instances:view')).toBe(true);
    expect(structuredGrantSatisfies('*:view', 'alterations:execute')).toBe(false);
    expect(structuredGrantSatisfies('*:execute', 'alterations:execute')).toBe(true);
  });

  it('"{resource}:*" covers any verb on exactly that resource', () => {
    expect(structuredGrantSatisfies('connections:*', 'connections:delete')).toBe(true);
    expect(structuredGrantSatisfies('workflows/definitions:*', 'workflows/instances:view')).toBe(false);
    expect(structuredGrantSatisfies('workflows:*', 'workflows/definitions:view')).toBe(false);
  });

  it('legacy strings authorize nothing in the structured model', () => {
    expect(grantsSatisfy('structured', ['run:alterations'], 'alterations:execute')).toBe(false);
    expect(grantsSatisfy('structured', ['read:workflow-definitions'], 'workflows/definitions:view')).toBe(false);
  });
});

describe('legacy permissions', () => {
  it('match exactly, or "*"', () => {
    expect(grantsSatisfy('legacy', ['run:alterations'], 'run:alterations')).toBe(true);
    expect(grantsSatisfy('legacy', ['*'], 'read:alterations')).toBe(true);
    expect(grantsSatisfy('legacy', ['alterations:execute'], 'run:alterations')).toBe(false);
    expect(grantsSatisfy('legacy', ['*:execute'], 'run:alterations')).toBe(false);
  });
});
