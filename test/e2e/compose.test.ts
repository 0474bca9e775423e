import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';

/**
 * docker-compose.yml as an operator runs it: `docker compose up --scale api=2 --scale worker=3` behind one
 * published port, every long-running service with a health check, the secrets from the environment. No Docker
 * daemon runs here: the file is checked by `docker compose config` where the Compose CLI is installed (it
 * interpolates and validates against the Compose specification, as `up` would), else parsed as YAML.
 */
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const secrets = {
  ADMIN_API_KEY: 'wfa_compose_test_key',
  AUTH_SIGNING_KEY: 'compose-test-signing-key',
  POSTGRES_PASSWORD: 'compose-test-password',
};

function compose(args: string[], env: Record<string, string> = secrets): string {
  return execFileSync('docker', ['compose', ...args], {
    cwd: ROOT,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env },
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

const hasComposeCli = (() => {
  try {
    compose(['version']);
    return true;
  } catch {
    return false;
  }
})();

interface Service {
  image?: string;
  build?: unknown;
  ports?: unknown[];
  container_name?: string;
  healthcheck?: { test?: unknown };
  environment?: Record<string, string | null>;
  command?: string[] | string;
  restart?: string;
}

const services: Record<string, Service> = hasComposeCli
  ? (JSON.parse(compose(['config', '--format', 'json'])) as { services: Record<string, Service> }).services
  : (
      parse(readFileSync(`${ROOT}/docker-compose.yml`, 'utf8'), { merge: true }) as {
        services: Record<string, Service>;
      }
    ).services;

describe(`docker-compose.yml (${hasComposeCli ? 'docker compose config' : 'parsed as YAML: no Compose CLI here'})`, () => {
  it('runs the Temporal server on Postgres with its schema set up by the admin tools, not auto-setup', () => {
    expect(Object.values(services).some((s) => s.image?.includes('auto-setup'))).toBe(false);
    expect(services.temporal?.image).toMatch(/^temporalio\/server:/);
    expect(services['temporal-schema']?.image).toMatch(/^temporalio\/admin-tools:/);
    expect(services.temporal?.environment).toMatchObject({
      DB: 'postgres12',
      VISIBILITY_DBNAME: 'temporal_visibility',
    });
  });

  it('publishes one port for every API node, so api and worker scale', () => {
    for (const name of ['api', 'worker']) {
      expect(services[name]?.ports ?? [], name).toEqual([]);
      expect(services[name]?.container_name, name).toBeUndefined();
    }
    const published = Object.entries(services)
      .filter(([, s]) => (s.ports ?? []).length > 0)
      .map(([n]) => n)
      .sort();
    expect(published).toEqual(['proxy', 'temporal-ui']);
    const caddy = readFileSync(`${ROOT}/docker/Caddyfile`, 'utf8');
    expect(caddy).toMatch(/dynamic a \{\s*name api\s*port 3000/);
  });

  it('has a health check on every long-running service', () => {
    const oneShot = ['temporal-schema', 'temporal-setup'];
    for (const [name, s] of Object.entries(services)) {
      if (oneShot.includes(name)) continue;
      expect(s.healthcheck?.test, name).toBeDefined();
    }
    expect(JSON.stringify(services.api?.healthcheck?.test)).toContain('/health/ready');
    expect(JSON.stringify(services.worker?.healthcheck?.test)).toContain('9464/health/ready');
    expect(services.worker?.environment?.METRICS_PORT).toBe(hasComposeCli ? '9464' : 9464);
  });

  it.skipIf(!hasComposeCli)('takes its secrets from the environment and refuses to start without them', () => {
    const env = JSON.stringify(services.api?.environment);
    for (const value of Object.values(secrets)) expect(env).toContain(value);
    const { POSTGRES_PASSWORD: _omitted, ...partial } = secrets;
    expect(() => compose(['config', '-q'], partial)).toThrow(/POSTGRES_PASSWORD/);
  });
});
