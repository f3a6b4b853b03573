-- Runs once, when the container initialises its data directory.
CREATE EXTENSION IF NOT EXISTS agent_memory;
