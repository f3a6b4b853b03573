-- agent_memory 0.2.0 -> 0.3.0. Run by ALTER EXTENSION agent_memory UPDATE;
-- scripts/upgrade_test.sh checks that the result equals a fresh 0.3.0
-- install, object by object.
\echo Use "ALTER EXTENSION agent_memory UPDATE TO '0.3.0'" to load this file. \quit
