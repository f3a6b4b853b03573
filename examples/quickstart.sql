-- agent_memory quick start. `make demo` runs this file against a fresh
-- cluster that preloads the library; each capability adds its section.

CREATE EXTENSION IF NOT EXISTS agent_memory;

-- The extension, its version and its settings.
\dx agent_memory
SELECT agent_memory.version();
SELECT name, setting, unit FROM pg_settings WHERE name LIKE 'agent_memory.%' ORDER BY name;
