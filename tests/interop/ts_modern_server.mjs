// A modern-only MCP server (protocol 2026-07-28, `legacy: 'reject'`) built with the official TypeScript SDK v2,
// for the cross-era tests: today clients reach it directly, later it stands behind the gateway as a backend.
// Tools: `echo` ({text} back as text) and `ask_name`, which answers with an input_required result (one form
// elicitation under the key `who`, requestState `round-1`) until the retry carries an accepted answer.
// Usage: node ts_modern_server.mjs stdio    (serves on stdin/stdout)
//        node ts_modern_server.mjs http     (prints its URL, http://127.0.0.1:PORT/mcp, then serves)
import http from "node:http";
import { toNodeHandler } from "@modelcontextprotocol/node";
import { createMcpHandler, inputRequired, McpServer } from "@modelcontextprotocol/server";
import { serveStdio } from "@modelcontextprotocol/server/stdio";
import * as z from "zod";

const NAME_SCHEMA = { type: "object", properties: { name: { type: "string" } }, required: ["name"] };

function build() {
  const server = new McpServer(
    { name: "ts-modern", version: "1.0.0" },
    { capabilities: { tools: { listChanged: true } } },
  );
  server.registerTool(
    "echo",
    { description: "Echo the text back.", inputSchema: z.object({ text: z.string() }) },
    async ({ text }) => ({ content: [{ type: "text", text }] }),
  );
  server.registerTool(
    "ask_name",
    { description: "Ask the user's name, then greet them.", inputSchema: z.object({}) },
    async (_arguments, ctx) => {
      const answer = ctx.mcpReq.inputResponses?.who;
      if (answer?.action === "accept") {
        return { content: [{ type: "text", text: `Hello, ${answer.content.name}` }] };
      }
      const who = inputRequired.elicit({ message: "What is your name?", requestedSchema: NAME_SCHEMA });
      return inputRequired({ inputRequests: { who }, requestState: "round-1" });
    },
  );
  return server;
}

const transport = process.argv[2];
if (transport === "stdio") {
  serveStdio(build, { legacy: "reject" });
} else if (transport === "http") {
  const listener = http.createServer(toNodeHandler(createMcpHandler(build, { legacy: "reject" })));
  listener.listen(0, "127.0.0.1", () => {
    process.stdout.write(`http://127.0.0.1:${listener.address().port}/mcp\n`);
  });
} else {
  console.error("usage: node ts_modern_server.mjs stdio|http");
  process.exit(2);
}
