// The official TypeScript SDK clients answering the gateway's approval questions (#36): the v2 client pinned
// to 2026-07-28 (`modern`: the question comes as an input_required round its client drives) or the v1 client
// (`legacy`: a real elicitation/create during the call). Its elicitation handler accepts, declines, then
// accepts "for this session"; it calls delete_item four times and prints one JSON line: each call's text and
// isError, and the questions it was asked. Exit 1 (error on stderr) on any failure.
// Usage: node ts_approval_client.mjs modern|legacy COMMAND [ARG...]     (spawns the gateway on stdio)
import { Client as ModernClient } from "@modelcontextprotocol/client";
import { StdioClientTransport as ModernStdio } from "@modelcontextprotocol/client/stdio";
import { Client as LegacyClient } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport as LegacyStdio } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const [era, command, ...args] = process.argv.slice(2);
if (!["modern", "legacy"].includes(era) || !command) {
  console.error("usage: node ts_approval_client.mjs modern|legacy COMMAND [ARG...]");
  process.exit(2);
}

const answers = [
  { action: "accept", content: {} },
  { action: "decline" },
  { action: "accept", content: { for_session: true } },
];
const questions = [];
async function answer(request) {
  questions.push(request.params.message);
  const next = answers.shift();
  if (!next) throw new Error("asked more often than expected");
  return next;
}

try {
  const info = { name: `ts-approval-${era}`, version: "0.0.0" };
  let client;
  let transport;
  if (era === "modern") {
    client = new ModernClient(info, {
      capabilities: { elicitation: {} },
      versionNegotiation: { mode: { pin: "2026-07-28" } },
    });
    client.setRequestHandler("elicitation/create", answer);
    transport = new ModernStdio({ command, args });
  } else {
    client = new LegacyClient(info, { capabilities: { elicitation: {} } });
    client.setRequestHandler(ElicitRequestSchema, answer);
    transport = new LegacyStdio({ command, args });
  }
  await client.connect(transport);
  const calls = [];
  for (const id of ["1", "2", "3", "4"]) {
    const result = await client.callTool({ name: "delete_item", arguments: { id } });
    calls.push({ text: result.content.map((block) => block.text).join(""), isError: result.isError === true });
  }
  await client.close();
  process.stdout.write(`${JSON.stringify({ calls, questions })}\n`, () => process.exit(0));
} catch (error) {
  console.error(error?.stack ?? String(error));
  process.exit(1);
}
