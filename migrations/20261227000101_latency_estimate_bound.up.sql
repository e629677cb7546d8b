-- A capability's `estimatedLatencyMs` is at most the longest `timeoutMs` a delegation may ask
-- for (24 hours): a requester can always give a target the time it says it needs. An estimate
-- stored above that before the bound is lowered to it.
UPDATE capabilities SET estimated_latency_ms = 86400000 WHERE estimated_latency_ms > 86400000;
ALTER TABLE capabilities ADD CONSTRAINT capabilities_latency_bound CHECK (estimated_latency_ms <= 86400000);
