DELETE FROM jobs j WHERE NOT EXISTS (SELECT 1 FROM replicas r WHERE r.id = j.owner);
ALTER TABLE jobs ADD CONSTRAINT jobs_owner_fkey FOREIGN KEY (owner) REFERENCES replicas (id) ON DELETE CASCADE;
