-- A plan made by `POST /alterations/{planId}/retry-failed` names the plan whose failed jobs it retries.
ALTER TABLE alteration_plans ADD COLUMN retry_of text;
