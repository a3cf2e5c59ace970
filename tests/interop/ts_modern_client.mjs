// The official TypeScript SDK v2 client pinned to protocol 2026-07-28 (it probes server/discover and never falls
// back to initialize), for the cross-era tests: list tools, call `echo`, call `ask_name` through one
// elicitation round (answered "Ada"), print one JSON line with what came back, close. Exit 1 (error on
// stderr) on any failure.
// Usage: node ts_modern_client.mjs http://127.0.0.1:PORT/mcp
//        node ts_modern_client.mjs COMMAND [ARG...]     (spawns a stdio server)
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";

const [target, ...args] = process.argv.slice(2);
if (!target) {
  console.error("usage: node ts_modern_client.mjs URL | COMMAND [ARG...]");
  process.exit(2);
}

function text(result) {
  if (result.isError) throw new Error(`tool failed: ${JSON.stringify(result.content)}`);
  return result.content.map((block) => block.text).join("");
}

try {
  const client = new Client(
    { name: "ts-modern-client", version: "0.0.0" },
    { capabilities: { elicitation: {} }, versionNegotiation: { mode: { pin: "2026-07-28" } } },
  );
  let elicited = 0;
  client.setRequestHandler("elicitation/create", async () => {
    elicited += 1;
    return { action: "accept", content: { name: "Ada" } };
  });
  const transport = /^https?:/.test(target)
    ? new StreamableHTTPClientTransport(new URL(target))
    : new StdioClientTransport({ command: target, args });
  await client.connect(transport);
  const report = {
    protocolVersion: client.getNegotiatedProtocolVersion(),
    era: client.getProtocolEra(),
    serverName: client.getServerVersion()?.name,
    tools: (await client.listTools()).tools.map((tool) => tool.name),
    echo: text(await client.callTool({ name: "echo", arguments: { text: "from typescript" } })),
    askName: text(await client.callTool({ name: "ask_name", arguments: {} })),
  };
  report.elicited = elicited;
  await client.close();
  process.stdout.write(`${JSON.stringify(report)}\n`, () => process.exit(0));
} catch (error) {
  console.error(error?.stack ?? String(error));
  process.exit(1);
}
