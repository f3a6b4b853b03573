-- agent_memory: comments on every function (shown by \df+ and \dd).

COMMENT ON FUNCTION agent_memory.version() IS
    'Version of the loaded agent_memory library (compare with pg_extension.extversion after an upgrade)';
