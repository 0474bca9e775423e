-- The service's own database beside Temporal's (auto-setup creates `temporal` and `temporal_visibility`).
CREATE DATABASE workflow_alterations;
