/**
 * The plan table's one home (`alteration_plans`): every statement on it is in this folder, and nowhere else
 * (test/unit/plan-store.test.ts greps for it). Its files split it by who asks; this module is what the rest imports.
 */
export * from './rows.js';
export * from './submission.js';
export * from './reads.js';
export * from './steering.js';
export * from './governance.js';
export * from './processing.js';
export * from './retention.js';
