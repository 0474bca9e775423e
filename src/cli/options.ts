import { InvalidArgumentError } from 'commander';

/** Parsers of option values (commander's): a wrong value is a usage error that says what was expected. */

/** A positive number. */
export function positive(value: string): number {
  const v = Number(value);
  if (!Number.isFinite(v) || v <= 0) throw new InvalidArgumentError('Expected a positive number.');
  return v;
}

/** A whole number of 1 or more. */
export function count(value: string): number {
  const v = Number(value);
  if (!Number.isInteger(v) || v < 1) throw new InvalidArgumentError('Expected a whole number of 1 or more.');
  return v;
}

/** A ratio from 0 to 1. */
export function ratio(value: string): number {
  const v = Number(value);
  if (!Number.isFinite(v) || v < 0 || v > 1) throw new InvalidArgumentError('Expected a number from 0 to 1.');
  return v;
}
