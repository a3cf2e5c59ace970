// A modern-only MCP server (protocol 2026-07-28, `legacy: 'reject'`) built with the official TypeScript SDK v2,
// for the cross-era tests: today clients reach it directly, later it stands behind the gateway as a backend.
// Tools: `echo` ({text} back as text) and `ask_name`, which answers with an input_required result (one form
// elicitation under the key `who`, requestState `round-1`) until the retry carries an accepted answer;
// `ask_model` the same with one sampling request under the key `model` (requestState `sampling-1`); for
// the gateway's backend tests: `whoami` (the request's envelope and the rest of its _meta, as JSON text),
// `add_tool` ({name}: one more tool, `name`, which echoes too, announced as a tools list change), `touch`
// ({uri}: a resources/updated for it), `regional` (its `region` goes in the Mcp-Param-Region header over
// HTTP). One resource, test://ts/note; the server takes resource subscriptions through listen.
// Usage: node ts_modern_server.mjs stdio    (serves on stdin/stdout)
//        node ts_modern_server.mjs http     (prints its URL, http://127.0.0.1:PORT/mcp, then serves)
import http from "node:http";
import { toNodeHandler } from "@modelcontextprotocol/node";
import { createMcpHandler, inputRequired, McpServer } from "@modelcontextprotocol/server";
import { serveStdio } from "@modelcontextprotocol/server/stdio";
import * as z from "zod";

const NAME_SCHEMA = { type: "object", properties: { name: { type: "string" } }, required: ["name"] };

const added = []; // tools add_tool registered: every instance a factory builds has them (HTTP builds one per request)
let changes; // how a tool announces a change: the stdio instance's own notifications, or the HTTP handler's bus

function build() {
  const server = new McpServer(
    { name: "ts-modern", version: "1.0.0" },
    { capabilities: { tools: { listChanged: true }, resources: { subscribe: true, listChanged: true } } },
  );
  const echoed = async ({ text }) => ({ content: [{ type: "text", text }] });
  server.registerTool(
    "echo",
    { description: "Echo the text back.", inputSchema: z.object({ text: z.string() }) },
    echoed,
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
  server.registerTool(
    "ask_model",
    { description: "Ask the client's model a question, then quote its answer.", inputSchema: z.object({}) },
    async (_arguments, ctx) => {
      const answer = ctx.mcpReq.inputResponses?.model;
      if (answer?.content?.type === "text") {
        return { content: [{ type: "text", text: `The model said: ${answer.content.text}` }] };
      }
      const question = { role: "user", content: { type: "text", text: "Capital of France?" } };
      const model = inputRequired.createMessage({ messages: [question], maxTokens: 20 });
      return inputRequired({ inputRequests: { model }, requestState: "sampling-1" });
    },
  );
  server.registerTool(
    "whoami",
    { description: "The request's envelope and _meta.", inputSchema: z.object({}) },
    async (_arguments, ctx) => {
      const text = JSON.stringify({ envelope: ctx.mcpReq.envelope ?? null, meta: ctx.mcpReq._meta ?? null });
      return { content: [{ type: "text", text }] };
    },
  );
  server.registerTool(
    "add_tool",
    { description: "Add a tool that echoes.", inputSchema: z.object({ name: z.string() }) },
    async ({ name }) => {
      added.push(name);
      server.registerTool(name, { description: "Added.", inputSchema: z.object({ text: z.string() }) }, echoed);
      await changes.toolsChanged(server);
      return { content: [{ type: "text", text: `added ${name}` }] };
    },
  );
  server.registerTool(
    "touch",
    { description: "Announce an update of uri.", inputSchema: z.object({ uri: z.string() }) },
    async ({ uri }) => {
      await changes.resourceUpdated(server, uri);
      return { content: [{ type: "text", text: `touched ${uri}` }] };
    },
  );
  server.registerTool(
    "regional",
    {
      description: "Say which region the Mcp-Param-Region header named.",
      inputSchema: z.object({ region: z.string().meta({ "x-mcp-header": "Region" }), count: z.number().int() }),
    },
    async ({ region, count }) => ({ content: [{ type: "text", text: `${region} x${count}` }] }),
  );
  for (const name of added) {
    server.registerTool(name, { description: "Added.", inputSchema: z.object({ text: z.string() }) }, echoed);
  }
  server.registerResource("note", "test://ts/note", { mimeType: "text/plain" }, async (uri) => ({
    contents: [{ uri: uri.href, mimeType: "text/plain", text: "a note" }],
  }));
  return server;
}

const transport = process.argv[2];
if (transport === "stdio") {
  changes = {
    toolsChanged: (server) => server.sendToolListChanged(),
    resourceUpdated: (server, uri) => server.server.sendResourceUpdated({ uri }),
  };
  serveStdio(build, { legacy: "reject" });
} else if (transport === "http") {
  const handler = createMcpHandler(build, { legacy: "reject" });
  changes = {
    toolsChanged: () => handler.notify.toolsChanged(),
    resourceUpdated: (_server, uri) => handler.notify.resourceUpdated(uri),
  };
  const listener = http.createServer(toNodeHandler(handler));
  listener.listen(0, "127.0.0.1", () => {
    process.stdout.write(`http://127.0.0.1:${listener.address().port}/mcp\n`);
  });
} else {
  console.error("usage: node ts_modern_server.mjs stdio|http");
  process.exit(2);
}
