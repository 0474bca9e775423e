-- The outbound calls being sent now, one row per activity record (activities/calls.ts): a delivery of a call
-- claims its record's row before its request goes out and gives it back when the call has ended, so that no
-- second delivery of the same call (the same Idempotency-Key) goes out while the first is still out (attack
-- report L3: a revert of a Cancel made the call again while the cancelled one was still out). `out_until` is
-- when the first delivery has certainly ended from this side (its connection's timeoutMs, and a margin,
-- after its start): a claim left by a worker that died is taken over after it.
CREATE TABLE outbound_calls_out (
  record_id  text PRIMARY KEY,
  claim      text NOT NULL,
  out_until  timestamptz NOT NULL
);
