DELETE FROM artifacts a WHERE NOT EXISTS (SELECT 1 FROM replicas r WHERE r.id = a.owner);
ALTER TABLE artifacts ADD CONSTRAINT artifacts_owner_fkey FOREIGN KEY (owner) REFERENCES replicas (id) ON DELETE CASCADE;
