// agent_memory from Node.js: the agent loop of examples/SCENARIO.md with the
// `pg` package (node-postgres).
//
// A travel assistant has a two-turn conversation with user alice. A small
// fake model (a pure function, no LLM) decides each step; every step goes
// straight to SQL: the history with append_message, the memory tool in both
// dialects (Claude's client-side memory tool and the extension's own),
// facts with update_context / kv_set, working memory with wm_set. Then it
// reads everything back and checks it, printing "ok - <check>" per check;
// the first failed check prints "not ok - ..." and exits with code 1.
//
// Run it against a database where `CREATE EXTENSION agent_memory` was done:
//
//     npm ci
//     PGDATABASE=mydb node agent.mjs
//
// The connection comes from the libpq environment variables PGHOST (a host
// or a unix socket directory), PGPORT, PGUSER, PGPASSWORD and PGDATABASE.
// Every call is schema-qualified (agent_memory.…) and parameterised ($1);
// JSON goes in as text with a ::jsonb cast, and node-postgres hands jsonb
// results back already parsed.

import { isDeepStrictEqual } from 'node:util';
import pg from 'pg';

const SESSION = 'trip-node';
const USER = 'alice';
const SESSION_METADATA = { channel: 'example', client: 'node' };
const MEMORY_NODE = 'travel-agent';

const TURNS = [
  "I'd like to fly to Lisbon next week. I prefer a window seat.",
  'Remind me which seat I like, and note that I am vegetarian.',
];

// What the app writes to the session's working memory after each turn.
// What recall finds before each turn's model call, [kind, ref], best first:
// the three memories of the session and the node's files that best match
// what alice says.
const RECALLED_BEFORE_TURN = [
  [],
  [['kv', 'seat'], ['message', '1'], ['message', '6']],
];

const WORKING_MEMORY_AFTER_TURN = [
  { part: 'working_history', value: 'Planning a Lisbon trip' },
  { part: 'fetched_context', value: { fares: [412, 388] } },
];

// ---------------------------------------------------------------------------
// The fake model: a pure function of the turn (0 or 1) and the tool results
// seen so far in that turn. It answers with the next step:
//   { toolUse: <Claude-style tool_use block>, via: <SQL function to run it> }
//   { text: <final answer>, facts: <object to remember>, via: <SQL function> }
// A real app would pick one tool dialect; this one shows all three entry
// points, so the model says which one each call goes through.

function fakeModel(turn, toolResults) {
  const toolUse = (id, input) => ({ type: 'tool_use', id, name: 'memory', input });
  const script = [
    [
      // Claude's dialect: paths under /memories.
      {
        toolUse: toolUse('toolu_01', { command: 'view', path: '/memories' }),
        via: 'claude_memory_tool_result',
      },
      {
        toolUse: toolUse('toolu_02', {
          command: 'create',
          path: '/memories/preferences.md',
          file_text: '- seat: window\n',
        }),
        via: 'claude_memory',
      },
      {
        text: 'Noted: Lisbon next week, window seat.',
        facts: { destination: 'Lisbon', seat: 'window' },
        via: 'update_context',
      },
    ],
    [
      // The extension's own dialect: the same files, without /memories.
      {
        toolUse: toolUse('call_03', { command: 'read', path: '/preferences.md' }),
        via: 'memory_tool',
      },
      {
        toolUse: toolUse('call_04', {
          command: 'append',
          path: '/preferences.md',
          content: '- meal: vegetarian\n',
        }),
        via: 'memory_tool',
      },
      {
        text: 'You like a window seat. I noted that you are vegetarian.',
        facts: { meal: 'vegetarian' },
        via: 'kv_set',
      },
    ],
  ];
  return script[turn][toolResults.length];
}

// ---------------------------------------------------------------------------
// Runs a tool_use block in SQL and returns the tool's answer as text, exactly
// as the function returned it (this is what the tool message stores).

async function runTool(client, scope, { toolUse, via }) {
  switch (via) {
    case 'claude_memory_tool_result': // the whole block in, a tool_result block out
      return one(client,
        'SELECT agent_memory.claude_memory_tool_result($1, $2::jsonb)::text AS answer',
        [scope, JSON.stringify(toolUse)]);
    case 'claude_memory': // the block's input in, Claude's text out
      return one(client,
        'SELECT agent_memory.claude_memory($1, $2::jsonb) AS answer',
        [scope, JSON.stringify(toolUse.input)]);
    case 'memory_tool': // the extension's request in, its JSON envelope out
      return one(client,
        'SELECT agent_memory.memory_tool($1, $2::jsonb)::text AS answer',
        [scope, JSON.stringify(toolUse.input)]);
    default:
      throw new Error(`no route for tool call ${toolUse.id} via ${via}`);
  }
}

// First column of the only row.
async function one(client, sql, params) {
  const { rows, fields } = await client.query(sql, params);
  return rows[0][fields[0].name];
}

function appendMessage(client, role, content, metadata = {}) {
  return client.query(
    'SELECT agent_memory.append_message($1, $2, $3, metadata => $4::jsonb)',
    [SESSION, role, content, JSON.stringify(metadata)]);
}

// ---------------------------------------------------------------------------
// The agent loop.

async function runConversation(client, scope) {
  // A clean slate, so that the example can run again in the same database:
  // end the session if a failed run left it, and delete the file it writes.
  await client.query('SELECT agent_memory.end_session($1)', [SESSION]);
  await client.query('SELECT agent_memory.memory_tool($1, $2::jsonb)',
    [scope, JSON.stringify({ command: 'delete', path: '/preferences.md' })]);

  await client.query(
    'SELECT agent_memory.create_session($1, $2::jsonb, session_id => $3)',
    [USER, JSON.stringify(SESSION_METADATA), SESSION]);

  const recalled = [];
  for (const [turn, userText] of TURNS.entries()) {
    // What the agent already knows that bears on alice's words, for the
    // prompt (the fake model does without it).
    const { rows } = await client.query(
      `SELECT kind, ref FROM agent_memory.recall($1, session_id => $2,
                                                scope => agent_memory.memory_scope($3), k => 3)`,
      [userText, SESSION, MEMORY_NODE]);
    recalled.push(rows.map((row) => [row.kind, row.ref]));
    await appendMessage(client, 'user', userText);
    const toolResults = [];
    for (;;) {
      const step = fakeModel(turn, toolResults);
      if (step.toolUse) {
        const { id, name, input } = step.toolUse;
        await appendMessage(client, 'assistant', '', { tool_calls: [{ id, name, input }] });
        const answer = await runTool(client, scope, step);
        await appendMessage(client, 'tool', answer, { tool_call_id: id });
        toolResults.push(answer);
        continue;
      }
      await appendMessage(client, 'assistant', step.text);
      if (step.via === 'update_context') {
        await client.query('SELECT agent_memory.update_context($1, $2::jsonb)',
          [SESSION, JSON.stringify(step.facts)]);
      } else {
        for (const [key, value] of Object.entries(step.facts)) {
          await client.query('SELECT agent_memory.kv_set($1, $2, $3::jsonb)',
            [SESSION, key, JSON.stringify(value)]);
        }
      }
      break;
    }
    const { part, value } = WORKING_MEMORY_AFTER_TURN[turn];
    await client.query('SELECT agent_memory.wm_set($1, $2, $3::jsonb)',
      [SESSION, part, JSON.stringify(value)]);
  }
  return recalled;
}

// ---------------------------------------------------------------------------
// The checks.

class CheckFailed extends Error {}

let passed = 0;

// Runs one check: `body` returns nothing when all is well, or a string saying
// what was expected and what came instead.
async function check(name, body) {
  const problem = await body();
  if (problem) {
    throw new CheckFailed(`not ok - ${name}: ${problem}`);
  }
  passed += 1;
  console.log(`ok - ${name}`);
}

const show = (value) => JSON.stringify(value);

function expectEqual(what, got, expected) {
  return isDeepStrictEqual(got, expected)
    ? null
    : `${what}: expected ${show(expected)}, got ${show(got)}`;
}

function firstProblem(...problems) {
  return problems.find(Boolean) ?? null;
}

async function runChecks(client, scope, recalled) {
  await check('recall before each turn: nothing yet, then what bears on the seat', async () =>
    expectEqual('recalled', recalled, RECALLED_BEFORE_TURN));

  await check('build_context: userId alice and the three remembered facts', async () => {
    const context = await one(client, 'SELECT agent_memory.build_context($1)', [SESSION]);
    return firstProblem(
      expectEqual('userId', context.userId, USER),
      expectEqual('memory', context.memory,
        { destination: 'Lisbon', seat: 'window', meal: 'vegetarian' }));
  });

  await check('messages: 12 in order, each tool result answering the call before it', async () => {
    const { rows } = await client.query(
      'SELECT seq, role, content, metadata FROM agent_memory.messages($1)', [SESSION]);
    const roles = ['user', 'assistant', 'tool', 'assistant', 'tool', 'assistant'];
    const problem = firstProblem(
      expectEqual('roles', rows.map((m) => m.role), [...roles, ...roles]),
      expectEqual('user messages',
        rows.filter((m) => m.role === 'user').map((m) => m.content), TURNS),
      expectEqual('final answers',
        rows.filter((m) => m.role === 'assistant' && !m.metadata.tool_calls).map((m) => m.content),
        ['Noted: Lisbon next week, window seat.',
          'You like a window seat. I noted that you are vegetarian.']));
    if (problem) return problem;
    // seq numbers are only promised to increase within the session.
    for (let i = 1; i < rows.length; i += 1) {
      if (!(BigInt(rows[i].seq) > BigInt(rows[i - 1].seq))) {
        return `seq should increase, got ${show(rows.map((m) => m.seq))}`;
      }
    }
    // Each tool message answers the call of the assistant message before it.
    const answers = {};
    for (let i = 0; i < rows.length; i += 1) {
      if (rows[i].role !== 'tool') continue;
      const calls = rows[i - 1].metadata.tool_calls;
      const callId = calls?.[0]?.id;
      const linked = firstProblem(
        expectEqual(`calls before message ${i + 1}`, calls?.length, 1),
        expectEqual(`content before message ${i + 1}`, rows[i - 1].content, ''),
        expectEqual(`metadata of tool message ${i + 1}`, rows[i].metadata, { tool_call_id: callId }));
      if (linked) return linked;
      answers[callId] = rows[i].content;
    }
    const envelope = (id) => JSON.parse(answers[id]);
    return firstProblem(
      expectEqual('call ids', Object.keys(answers), ['toolu_01', 'toolu_02', 'call_03', 'call_04']),
      // toolu_01: a tool_result block answering toolu_01, without is_error.
      expectEqual('toolu_01 block keys', Object.keys(envelope('toolu_01')).sort(),
        ['content', 'tool_use_id', 'type']),
      expectEqual('toolu_01 type', envelope('toolu_01').type, 'tool_result'),
      expectEqual('toolu_01 tool_use_id', envelope('toolu_01').tool_use_id, 'toolu_01'),
      expectEqual('toolu_02 answer', answers.toolu_02,
        'File created successfully at: /memories/preferences.md'),
      expectEqual('call_03 answer', envelope('call_03'), {
        command: 'read', path: '/preferences.md', ok: true,
        result: {
          content: '- seat: window\n', version: 1,
          sha256: '69c9fba93d669ce9fe0958c8b1a53729471b949626fd570caf0071da45323e1d',
        },
      }),
      expectEqual('call_04 answer', envelope('call_04'), {
        command: 'append', path: '/preferences.md', ok: true, result: { status: 'ok', version: 2 },
      }));
  });

  await check("claude_memory view: Claude's dialect sees the appended line", async () => {
    const text = await one(client, 'SELECT agent_memory.claude_memory($1, $2::jsonb)',
      [scope, JSON.stringify({ command: 'view', path: '/memories/preferences.md' })]);
    // A file view is a heading, then numbered lines: "     1\t- seat: window".
    const lines = text.split('\n').slice(1).map((line) => line.replace(/^ *\d+\t/, ''));
    return expectEqual('file lines', lines.slice(0, 2), ['- seat: window', '- meal: vegetarian']);
  });

  await check('working_memory: the parts written and the 12 messages', async () => {
    const wm = await one(client, 'SELECT agent_memory.working_memory($1)', [SESSION]);
    return firstProblem(
      expectEqual('working_history', wm.working_history, 'Planning a Lisbon trip'),
      expectEqual('fetched_context', wm.fetched_context, { fares: [412, 388] }),
      expectEqual('last_user_message', wm.last_user_message, TURNS[1]),
      expectEqual('number of messages', wm.messages?.length, 12),
      expectEqual('last message role', wm.messages?.at(-1)?.role, 'assistant'));
  });

  await check('memory_render full: shows /preferences.md', async () => {
    const text = await one(client, "SELECT agent_memory.memory_render($1, 'full')", [scope]);
    return text.includes('/preferences.md') ? null
      : `expected a text containing "/preferences.md", got ${show(text)}`;
  });

  await check('end_session: the session and its memory are gone', async () => {
    const ended = await one(client, 'SELECT agent_memory.end_session($1)', [SESSION]);
    const context = await one(client, 'SELECT agent_memory.build_context($1)', [SESSION]);
    let sqlstate = 'no error';
    try {
      await client.query('SELECT agent_memory.kv_set($1, $2, $3::jsonb)',
        [SESSION, 'meal', JSON.stringify('vegan')]);
    } catch (error) {
      sqlstate = error.code;
    }
    return firstProblem(
      expectEqual('end_session', ended, true),
      expectEqual('build_context error', context.error, 'session not found or expired'),
      expectEqual('kv_set after the end: SQLSTATE', sqlstate, 'P0002'));
  });
}

// ---------------------------------------------------------------------------

const client = new pg.Client(); // PGHOST, PGPORT, PGUSER, PGDATABASE, ...
try {
  await client.connect();
  const scope = await one(client, 'SELECT agent_memory.memory_scope($1)', [MEMORY_NODE]);
  const recalled = await runConversation(client, scope);
  await runChecks(client, scope, recalled);
  console.log(`${passed} checks passed`);
} catch (error) {
  if (error instanceof CheckFailed) {
    console.log(error.message);
  } else { // an SQL or connection error: say which, with its SQLSTATE
    console.log(`not ok - unexpected error${error.code ? ` (SQLSTATE ${error.code})` : ''}: ${error.message}`);
    console.error(error.stack);
  }
  process.exitCode = 1;
} finally {
  await client.end();
}
