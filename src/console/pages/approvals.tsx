import { Hono } from 'hono';
import type { Child } from 'hono/jsx';
import type { PlanStatus } from '../../alterations/model.js';
import { listPlans } from '../../alterations/plans.js';
import { type AppEnv, callerTenant } from '../../api/context.js';
import { ALTERATIONS_VIEW } from '../../auth/route-permissions.js';
import { NotAllowed, Scroll, Time } from '../components.js';
import { AWAITING_APPROVAL, count } from '../format.js';
import { Layout, renderPage } from '../layout.js';
import { may, permissionName, type ShellOf } from '../shell.js';

/**
 * Approvals (contract sections 10 and 11): the plans awaiting approval, as `GET /alterations?status=8`
 * lists them.
 *
 * Governance: this first round lists them only. To add: each plan's preview (`GET
 * /alterations/{planId}/preview`), who asked and when, and the buttons `Approve` and `Reject` with a
 * comment (`POST /alterations/{planId}/approve|reject`, permission `alterations:approve`: 403 for the
 * submitter, "A plan cannot be approved by the principal that submitted it"), as plan-commands and a
 * route-permissions spec, the way src/console/pages/plan.tsx runs its actions.
 */
export function approvalsRoutes(shell: ShellOf) {
  const app = new Hono<AppEnv>();
  app.get('/approvals', async (c) => {
    const frame = (body: Child, status: 200 | 403 = 200) =>
      renderPage(
        c,
        <Layout shell={shell(c)} title="Approvals" nav="approvals">
          <h1>Approvals</h1>
          {body}
        </Layout>,
        status,
      );
    if (!may(c, ALTERATIONS_VIEW))
      return frame(<NotAllowed what="see plans" permission={permissionName(c, ALTERATIONS_VIEW)} />, 403);
    const page = await listPlans(c.get('deps').pool, callerTenant(c), {
      status: AWAITING_APPROVAL as PlanStatus,
      limit: 100,
    });
    if (page.items.length === 0) return frame(<p>Nothing is awaiting approval.</p>);
    return frame(
      <Scroll label="Plans awaiting approval">
        <table>
          <thead>
            <tr>
              <th scope="col">Plan</th>
              <th scope="col">Alterations</th>
              <th scope="col">Instances</th>
              <th scope="col">Submitted</th>
            </tr>
          </thead>
          <tbody>
            {page.items.map((p) => (
              <tr>
                <th scope="row">
                  <a href={`/console/plans/${encodeURIComponent(p.id)}`}>{p.id}</a>
                </th>
                <td>{p.alterationTypes.join(', ')}</td>
                <td>{count(p.jobCounts.total)}</td>
                <td>
                  <Time iso={p.createdAt} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </Scroll>,
    );
  });
  return app;
}
