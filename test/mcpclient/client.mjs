// A stock MCP client: the official TypeScript SDK with its default request
// options (no timeout given, so DEFAULT_REQUEST_TIMEOUT_MSEC, no progress
// handler), connected to hitl-mcp over streamable HTTP with a
// ServiceAccount token. It asks one question and follows the continuation
// docs/mcp.md documents: while a result says {"waiting": true}, call
// wait_for_answer with its callID and question. It prints one JSON line per
// tool call and a line with the answers; then it asks once more, with an
// MCP elicitation schema as the question's input (callID HITL_CALL_ID
// "-typed"), and prints a last line with that answer's typed value. Any
// error (the SDK's request timeout, or a result that does not fit its
// tool's output schema, among them) exits non-zero.
//
// Environment: HITL_MCP_URL (the /mcp endpoint), HITL_MCP_TOKEN (a token
// for the audience hitl-mcp), HITL_CALL_ID (the ask's callID).
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { DEFAULT_REQUEST_TIMEOUT_MSEC } from '@modelcontextprotocol/sdk/shared/protocol.js';

const print = (line) => process.stdout.write(JSON.stringify(line) + '\n');

const transport = new StreamableHTTPClientTransport(new URL(process.env.HITL_MCP_URL), {
  requestInit: { headers: { Authorization: `Bearer ${process.env.HITL_MCP_TOKEN}` } },
});
const client = new Client({ name: 'hitl-mcpclient-test', version: '0.0.0' });
await client.connect(transport);
print({ defaultTimeoutMs: DEFAULT_REQUEST_TIMEOUT_MSEC });
// Listing the tools makes the SDK check every result against its tool's
// output schema.
const { tools } = await client.listTools();
print({ tools: tools.map((t) => t.name) });

// call calls a tool with the SDK's default request options, and prints
// how long it took and its structured result.
async function call(name, args, key = 'call') {
  const start = Date.now();
  const res = await client.callTool({ name, arguments: args });
  const text = res.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
  print({ [key]: name, ms: Date.now() - start, isError: res.isError === true, result: res.structuredContent, text });
  if (res.isError) {
    throw new Error(`${name} failed: ${text}`);
  }
  return res.structuredContent;
}

let res = await call('ask_user_question', {
  callID: process.env.HITL_CALL_ID,
  questions: [{
    id: 'env', question: 'Where should I deploy?', header: 'Deploy',
    options: [{ label: 'staging' }, { label: 'prod', description: 'the real thing' }],
  }],
});
while (res.waiting) {
  res = await call('wait_for_answer', { callID: res.callID, question: res.question });
}
print({ done: true, question: res.question, callID: res.callID, pending: res.pending === true, answers: res.answers ?? [] });

// A question typed with an elicitation schema: the answer's value is a
// JSON number.
res = await call('ask_user_question', {
  callID: `${process.env.HITL_CALL_ID}-typed`,
  questions: [{ id: 'replicas', question: 'How many replicas?', input: { type: 'integer', minimum: 1, maximum: 10 } }],
}, 'typedCall');
while (res.waiting) {
  res = await call('wait_for_answer', { callID: res.callID, question: res.question }, 'typedCall');
}
const value = res.answers?.[0]?.value;
print({ typed: true, question: res.question, value, valueType: typeof value });
await client.close();
