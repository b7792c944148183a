-- The AgentState database's two roles, least privilege first (psql script, idempotent).
--
-- Run by a superuser connected to the AgentState database: by the dev stack on every start
-- (workers/stack/postgres.py) and by the agentstate-db container once, at initdb
-- (docker-compose.yml mounts it into /docker-entrypoint-initdb.d).
--
--   AGENTSTATE_OWNER_ROLE (agent_owner) owns the database, the schema and every table; it
--     runs the migrations (DATABASE_MIGRATION_URL) and nothing else.
--   AGENTSTATE_APP_ROLE (agent) is what workers and the gateway log in as (DATABASE_URL):
--     SELECT/INSERT/UPDATE/DELETE on tables, USAGE/SELECT on sequences, EXECUTE on functions,
--     through default privileges so a later migration's tables are covered too. No DDL, no
--     TRUNCATE, no CREATE DATABASE/ROLE, no temporary tables.
--   AGENTSTATE_OWNER_PASSWORD / AGENTSTATE_APP_PASSWORD, when set, become their passwords.

\set ON_ERROR_STOP on
\set QUIET on

\getenv owner AGENTSTATE_OWNER_ROLE
\if :{?owner}
\else
  \set owner agent_owner
\endif
\getenv app AGENTSTATE_APP_ROLE
\if :{?app}
\else
  \set app agent
\endif
\getenv owner_password AGENTSTATE_OWNER_PASSWORD
\getenv app_password AGENTSTATE_APP_PASSWORD

SELECT format('CREATE ROLE %I', r) FROM unnest(ARRAY[:'owner', :'app']) AS r
 WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = r) \gexec
-- Also when an older dev stack made the app role with CREATEDB and let it own everything.
SELECT format('ALTER ROLE %I LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS', r)
  FROM unnest(ARRAY[:'owner', :'app']) AS r \gexec
\if :{?owner_password}
SELECT format('ALTER ROLE %I PASSWORD %L', :'owner', :'owner_password') \gexec
\endif
\if :{?app_password}
SELECT format('ALTER ROLE %I PASSWORD %L', :'app', :'app_password') \gexec
\endif
SELECT format('REASSIGN OWNED BY %I TO %I', :'app', :'owner') \gexec

SELECT format('ALTER DATABASE %I OWNER TO %I', current_database(), :'owner') \gexec
SELECT format('REVOKE ALL ON DATABASE %I FROM PUBLIC', current_database()) \gexec
SELECT format('GRANT CONNECT ON DATABASE %I TO %I', current_database(), :'app') \gexec
SELECT format('ALTER SCHEMA public OWNER TO %I', :'owner') \gexec
REVOKE ALL ON SCHEMA public FROM PUBLIC;
SELECT format('GRANT USAGE ON SCHEMA public TO %I', :'app') \gexec

-- What exists already (a database migrated before this ran) ...
SELECT format('GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO %I', :'app') \gexec
SELECT format('GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO %I', :'app') \gexec
SELECT format('GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO %I', :'app') \gexec
-- ... and whatever the owner's migrations create later.
SELECT format('ALTER DEFAULT PRIVILEGES FOR ROLE %I IN SCHEMA public '
              'GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO %I', :'owner', :'app') \gexec
SELECT format('ALTER DEFAULT PRIVILEGES FOR ROLE %I IN SCHEMA public '
              'GRANT USAGE, SELECT ON SEQUENCES TO %I', :'owner', :'app') \gexec
SELECT format('ALTER DEFAULT PRIVILEGES FOR ROLE %I IN SCHEMA public '
              'GRANT EXECUTE ON FUNCTIONS TO %I', :'owner', :'app') \gexec
